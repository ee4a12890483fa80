package main

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/kubectl-registry/kubectl-registry"

// goPackage is what `go list -json` says of a package that layering looks at.
type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T, patterns ...string) []goPackage {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports,Deps"}, patterns...)...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// layer returns the layer of one of our packages: 0 reconciler/api, 1 reconciler, 2
// plugin, 3 cmd; -1 for anything else (manifests, testdata).
func layer(path string) int {
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return -1
	}
	switch {
	case strings.HasPrefix(rel, "reconciler/api/"):
		return 0
	case strings.HasPrefix(rel, "reconciler/"):
		return 1
	case strings.HasPrefix(rel, "plugin/") || rel == "plugin":
		return 2
	case strings.HasPrefix(rel, "cmd/"):
		return 3
	}
	return -1
}

// testInfrastructure reports whether a package of ours exists for tests only.
func testInfrastructure(path string) bool {
	rel := strings.TrimPrefix(path, module+"/")
	return strings.HasPrefix(rel, "reconciler/testbed") || strings.HasPrefix(rel, "reconciler/e2e") ||
		strings.HasPrefix(rel, "plugin/internal/plugintest")
}

// runsTheTestBed reports whether a command exists to run the test bed: the demo and the
// bench start real API servers on loopback, as the tests do.
func runsTheTestBed(path string) bool {
	return path == module+"/cmd/registry-demo" || path == module+"/cmd/registry-bench"
}

// TestLayering: dependencies point one way, cmd -> plugin -> reconciler ->
// reconciler/api; the product (the binary, the plugin and the controller) links no test
// infrastructure; sync-diff runs the planner, not the controller runtime.
func TestLayering(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	for _, p := range listPackages(t, module+"/...") {
		if testInfrastructure(p.ImportPath) || layer(p.ImportPath) < 0 {
			continue
		}
		from := layer(p.ImportPath)
		for _, imp := range p.Imports {
			if to := layer(imp); to > from {
				t.Errorf("%s imports %s: an arrow running up (cmd -> plugin -> reconciler -> reconciler/api)", p.ImportPath, imp)
			}
			if testInfrastructure(imp) && !runsTheTestBed(p.ImportPath) {
				t.Errorf("%s imports the test infrastructure %s", p.ImportPath, imp)
			}
		}
	}
	for _, p := range listPackages(t, module+"/cmd/kubectl-registry") {
		for _, d := range p.Deps {
			if d == "testing" || testInfrastructure(d) {
				t.Errorf("the kubectl-registry binary links %s", d)
			}
		}
	}
	for _, p := range listPackages(t, module+"/plugin/syncdiff") {
		for _, d := range p.Deps {
			if d == module+"/reconciler/engine" || d == module+"/reconciler/manager" {
				t.Errorf("sync-diff links the controller runtime package %s: it must run the planner only", d)
			}
		}
	}
}
