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
// manifests (the embedded YAML install applies; it reads the API's names), 3 plugin, 4
// cmd; -1 for anything else (testdata). A package may import its own layer and those
// below it, never one above.
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
	case strings.HasPrefix(rel, "manifests/") || rel == "manifests":
		return 2
	case strings.HasPrefix(rel, "plugin/") || rel == "plugin":
		return 3
	case strings.HasPrefix(rel, "cmd/"):
		return 4
	}
	return -1
}

// under reports whether path is the package dir of our module or one below it.
func under(path, dir string) bool {
	rel, ok := strings.CutPrefix(path, module+"/")
	return ok && (rel == dir || strings.HasPrefix(rel, dir+"/"))
}

// testOnly reports whether a package of ours exists for tests only: only test files may
// import it, and it may import the testing package. The e2e harness (and the e2e test
// packages), and the plugin's test helpers.
func testOnly(path string) bool {
	return under(path, "reconciler/e2e") || under(path, "plugin/internal/plugintest")
}

// testBed reports whether a package is the test bed: tests import it, and so do the
// tools that run real API servers (runsTheTestBed), so it must not link testing.
func testBed(path string) bool {
	return under(path, "reconciler/testbed")
}

// runsTheTestBed reports whether a command exists to run the test bed: the demo and the
// bench start real API servers on loopback, as the tests do.
func runsTheTestBed(path string) bool {
	return path == module+"/cmd/registry-demo" || path == module+"/cmd/registry-bench"
}

// product reports whether a package is one of the binaries users run: the plugin (which
// is also the controller) and its krew completion shim.
func product(path string) bool {
	return path == module+"/cmd/kubectl-registry" || path == module+"/cmd/kubectl_complete-registry"
}

// cliPackage reports whether a package is of the CLI libraries the reconciler never
// links: cobra and cli-runtime.
func cliPackage(path string) bool {
	for _, m := range []string{"github.com/spf13/cobra", "k8s.io/cli-runtime"} {
		if path == m || strings.HasPrefix(path, m+"/") {
			return true
		}
	}
	return false
}

// TestLayering: dependencies point one way, cmd -> plugin -> manifests -> reconciler ->
// reconciler/api, test infrastructure included (it lives under reconciler/ and plugin/
// and obeys their layer); the reconciler links no CLI library; only tests import the
// test-only packages, and only tests and the tools that run the bed import the test bed;
// nothing but the test-only packages links the testing package, so neither the product
// (the binary, the plugin and the controller) nor the bench and the demo do; sync-diff
// runs the planner, not the controller runtime. Only non-test imports count: go list's
// Imports and Deps leave out those of _test.go files.
func TestLayering(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	pkgs := listPackages(t, module+"/...")
	if len(pkgs) < 10 {
		t.Fatalf("go list %s/... found %d packages: the check would be vacuous", module, len(pkgs))
	}
	for _, p := range pkgs {
		from := layer(p.ImportPath)
		for _, imp := range p.Imports {
			if to := layer(imp); from >= 0 && to > from {
				t.Errorf("%s imports %s: an arrow running up (cmd -> plugin -> manifests -> reconciler -> reconciler/api)", p.ImportPath, imp)
			}
			if testOnly(imp) && !testOnly(p.ImportPath) {
				t.Errorf("%s imports the test-only package %s: only tests may", p.ImportPath, imp)
			}
			if testBed(imp) && !testBed(p.ImportPath) && !testOnly(p.ImportPath) && !runsTheTestBed(p.ImportPath) {
				t.Errorf("%s imports the test bed %s: only tests and the tools that run the bed may", p.ImportPath, imp)
			}
		}
		for _, d := range p.Deps {
			if d == "testing" && !testOnly(p.ImportPath) {
				t.Errorf("%s links the testing package", p.ImportPath)
			}
			if cliPackage(d) && (from == 0 || from == 1) {
				t.Errorf("%s links the CLI package %s: the reconciler never does", p.ImportPath, d)
			}
		}
	}
	// The binaries, transitively (the loop above already holds them to no testing).
	for _, p := range listPackages(t, module+"/cmd/kubectl-registry", module+"/cmd/kubectl_complete-registry", module+"/cmd/registry-bench", module+"/cmd/registry-demo") {
		for _, d := range p.Deps {
			switch {
			case testOnly(d):
				t.Errorf("%s links the test-only package %s", p.ImportPath, d)
			case testBed(d) && product(p.ImportPath):
				t.Errorf("%s, a product binary, links the test bed %s", p.ImportPath, d)
			}
		}
	}
	for _, p := range listPackages(t, module+"/plugin/syncdiff") {
		for _, d := range p.Deps {
			// sync-diff links only the API, the pure planners (planner, planner/members,
			// rules) and kubeconfig of the reconciler: none of our controllers, informers,
			// work queues or peer connections.
			if under(d, "reconciler") && !under(d, "reconciler/api") && !under(d, "reconciler/planner") &&
				d != module+"/reconciler/rules" && d != module+"/reconciler/kubeconfig" && d != module+"/reconciler/buildinfo" {
				t.Errorf("sync-diff links the controller runtime package %s: it must run the planner only", d)
			}
		}
	}
}
