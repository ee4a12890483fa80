package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxDocRow is the longest table row the documentation may hold, in bytes: a row longer
// than this does not read as a table any more (on GitHub or in a terminal); its detail
// belongs in the prose around the table.
const maxDocRow = 400

// TestDocTableRows: no table row of README.md or docs/*.md is longer than maxDocRow.
func TestDocTableRows(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"))
	if len(files) < 5 {
		t.Fatalf("found %d documents (%v): is the test run from cmd/kubectl-registry?", len(files), files)
	}
	for _, f := range files {
		checkDocRows(t, f)
	}
}

func checkDocRows(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if line := sc.Text(); strings.HasPrefix(line, "|") && len(line) > maxDocRow {
			t.Errorf("%s:%d: a table row of %d bytes (at most %d): move its detail into the prose", path, n, len(line), maxDocRow)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
