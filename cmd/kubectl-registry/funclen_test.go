package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be, counted from its `func` line to its
// closing brace (its doc comment not included), unless its doc comment says why.
const maxFuncLines = 80

// longReason is the marker of a function allowed to be long: its doc comment holds a
// sentence starting with these words and giving the reason, as in "Long because it is
// one flat table of flags." Use it sparingly: split a long function along what it
// does first.
const longReason = "Long because"

// pendingSplit lists the long functions, as "dir/file.go:Func" or
// "dir/file.go:Type.Method" from the module's root, that are known to break the rule and
// are waiting to be split. Keep it empty: an entry is a debt, and the test fails on an
// entry that is no longer long (or no longer exists), so the list only shrinks.
var pendingSplit = map[string]bool{}

// goFiles is what `go list -json` says of a package's non-test files.
type goFiles struct {
	ImportPath     string
	Dir            string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
}

// listGoFiles returns the module's directory and the non-test Go files of every package
// of the module, named from the module's directory.
func listGoFiles(t *testing.T) (string, []string) {
	t.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	moduleDir := strings.TrimSpace(string(root))
	out, err := exec.Command("go", "list", "-json=ImportPath,Dir,GoFiles,CgoFiles,IgnoredGoFiles", module+"/...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var files []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goFiles
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		for _, f := range slices.Concat(p.GoFiles, p.CgoFiles, p.IgnoredGoFiles) {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			rel, err := filepath.Rel(moduleDir, filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatalf("%s is not under the module's directory %s: %v", f, moduleDir, err)
			}
			files = append(files, rel)
		}
	}
	return moduleDir, files
}

// funcKey names a function as pendingSplit does: "file:Func" or "file:Type.Method".
func funcKey(file string, fd *ast.FuncDecl) string {
	name := fd.Name.Name
	if fd.Recv != nil && len(fd.Recv.List) == 1 {
		typ := fd.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		switch x := typ.(type) {
		case *ast.IndexExpr: // a generic receiver, T[P]
			typ = x.X
		case *ast.IndexListExpr: // T[P, Q]
			typ = x.X
		}
		if id, ok := typ.(*ast.Ident); ok {
			name = id.Name + "." + name
		}
	}
	return filepath.ToSlash(file) + ":" + name
}

// TestFunctionLength: no function of the module is longer than maxFuncLines lines (from
// its `func` line to its closing brace) unless its doc comment gives the reason in a
// sentence starting with longReason (issue #29: an engine a newcomer can hold in their
// head). It reads every non-test Go file of the module's packages as `go list` sees
// them: the product (cmd, plugin, manifests, reconciler) and the test infrastructure
// that is not a _test.go file (reconciler/e2e, reconciler/testbed,
// plugin/internal/plugintest), which newcomers read as much as the product; testdata/
// (and the nested modules in it) is not part of the module's packages. Function
// literals count toward the function that holds them.
func TestFunctionLength(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	moduleDir, files := listGoFiles(t)
	if len(files) < 50 {
		t.Fatalf("go list found %d non-test Go files: the check would be vacuous", len(files))
	}
	seen := map[string]bool{}
	var long []string
	for _, file := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(moduleDir, file), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", file, err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			key := funcKey(file, fd)
			seen[key] = true
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if lines <= maxFuncLines || (fd.Doc != nil && strings.Contains(fd.Doc.Text(), longReason)) {
				if pendingSplit[key] {
					t.Errorf("%s is in pendingSplit but no longer breaks the rule: remove it from the list", key)
				}
				continue
			}
			if !pendingSplit[key] {
				long = append(long, fmt.Sprintf("%s (%d lines)", key, lines))
			}
		}
	}
	for key := range pendingSplit {
		if !seen[key] {
			t.Errorf("%s is in pendingSplit but no such function exists: remove it from the list", key)
		}
	}
	if len(long) > 0 {
		t.Errorf("%d functions are longer than %d lines without a reason: split them along what they do, "+
			"or give the reason in a doc comment sentence starting %q:\n\t%s",
			len(long), maxFuncLines, longReason, strings.Join(long, "\n\t"))
	}
}
