package main

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
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

// runsTheTestBed reports whether a command exists to run the test bed: the demo, the
// bench and the probe start real API servers on loopback, as the tests do.
func runsTheTestBed(path string) bool {
	return path == module+"/cmd/registry-demo" || path == module+"/cmd/registry-bench" || path == module+"/cmd/registry-probe"
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
// runs the planner, not the controller runtime; the planners link apimachinery and our
// API only (checkPlannerDeps); no verb of the plugin imports another (checkVerbsApart);
// the plugin imports none of the membership controllers (checkPluginOffTheControllers);
// the engine's parts import no engine, and only the parts allowed of each other
// (checkEngineParts).
// Only non-test imports count: go list's
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
	for _, p := range listPackages(t, module+"/cmd/kubectl-registry", module+"/cmd/kubectl_complete-registry", module+"/cmd/registry-bench", module+"/cmd/registry-demo", module+"/cmd/registry-probe") {
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
				d != module+"/reconciler/rules" && !under(d, "reconciler/kubeconfig") && d != module+"/reconciler/buildinfo" {
				t.Errorf("sync-diff links the controller runtime package %s: it must run the planner only", d)
			}
			// Nor the machinery of a running controller, of anyone: it reads with
			// client-go's dynamic and typed clients (plugin/internal/kube/clientgo). The
			// one exception is the work queue, which client-go's transport links for the
			// rotation of client certificates: every client-go client has it.
			if d != syncDiffWorkqueue && slices.ContainsFunc(controllerMachinery, func(m string) bool { return within(d, m) }) {
				t.Errorf("sync-diff links %s, of a running controller: it reads with client-go's clients only", d)
			}
		}
	}
	checkPlannerDeps(t)
	checkVerbsApart(t, pkgs)
	checkPluginOffTheControllers(t, pkgs)
	checkEngineParts(t, pkgs)
}

// syncDiffWorkqueue is the one package of controllerMachinery sync-diff links:
// k8s.io/client-go/transport (under k8s.io/client-go/rest) links it for the rotation of
// client certificates, so every client-go client does.
const syncDiffWorkqueue = "k8s.io/client-go/util/workqueue"

// controllerMachinery are the packages of a running controller: its runtime, informers,
// caches, work queues and leader election. A planner links none of them.
var controllerMachinery = []string{
	"sigs.k8s.io/controller-runtime",
	"k8s.io/client-go/tools/cache",
	"k8s.io/client-go/util/workqueue",
	"k8s.io/client-go/tools/leaderelection",
	"k8s.io/client-go/informers",
}

// plannerAllowed is everything the pure planners (reconciler/planner/...) may link
// besides the standard library, as `go list -deps ./reconciler/planner/...` printed it
// when this list was written: apimachinery and the API types with what they need, the
// Pod Security Standards, our API, rules and the kubeconfig document checks. A new
// dependency of the planner fails the test: link it only if it is as light as these,
// and add it here with the reason.
var plannerAllowed = []string{
	// The Kubernetes API machinery and types, and what they link.
	"k8s.io/apimachinery",
	"k8s.io/api",
	"k8s.io/utils",
	"k8s.io/klog/v2",               // apimachinery's logging
	"github.com/go-logr/logr",      // klog's
	"k8s.io/kube-openapi/pkg/util", // apimachinery's
	"sigs.k8s.io/json",             // apimachinery's JSON
	"sigs.k8s.io/yaml",             // apimachinery's YAML
	"go.yaml.in/yaml",              // sigs.k8s.io/yaml's
	"sigs.k8s.io/structured-merge-diff",
	"sigs.k8s.io/randfill",
	"gopkg.in/inf.v0",           // resource.Quantity
	"github.com/fxamacker/cbor", // apimachinery's CBOR
	"github.com/x448/float16",   // cbor's
	"github.com/json-iterator/go",
	"github.com/modern-go", // json-iterator's
	"github.com/gogo/protobuf",
	"google.golang.org/protobuf",
	"golang.org/x/net",  // apimachinery's util/net
	"golang.org/x/text", // x/net's idna
	// The Pod Security Standards a SyncPolicy holds copies' pod templates to.
	"k8s.io/pod-security-admission",
	"k8s.io/component-base/version", // pod-security-admission's (its version only)
	// rules: JSONPath of the API's field paths.
	"k8s.io/client-go/util/jsonpath",
	"k8s.io/client-go/third_party/forked/golang/template",
	// kubeconfig/document: the kubeconfig types and codec, no client.
	"k8s.io/client-go/tools/clientcmd/api",
	// Ours.
	module + "/reconciler/api",
	module + "/reconciler/rules",
	module + "/reconciler/planner",
	module + "/reconciler/kubeconfig/document",
}

// within reports whether path is prefix or a package below it.
func within(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// standard reports whether path is of the standard library (its first element has no
// dot; the vendored golang.org/x packages of the standard library start with vendor/).
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// checkPlannerDeps: the pure planners, reconciler/planner and every package under it,
// link no controller machinery and nothing beyond plannerAllowed, so sync-diff and
// tests run them without a controller.
func checkPlannerDeps(t *testing.T) {
	t.Helper()
	pkgs := listPackages(t, module+"/reconciler/planner/...")
	if len(pkgs) < 2 {
		t.Fatalf("go list %s/reconciler/planner/... found %d packages: expected planner and planner/members", module, len(pkgs))
	}
	for _, p := range pkgs {
		for _, d := range p.Deps {
			if slices.ContainsFunc(controllerMachinery, func(m string) bool { return within(d, m) }) {
				t.Errorf("the planner %s links %s, of a running controller", p.ImportPath, d)
				continue
			}
			if !standard(d) && !slices.ContainsFunc(plannerAllowed, func(a string) bool { return within(d, a) }) {
				t.Errorf("the planner %s links %s, which is not in plannerAllowed", p.ImportPath, d)
			}
		}
	}
}

// verb returns the verb of a plugin package ("syncdiff" for plugin/syncdiff and the
// packages under it), or "" for the plugin's root, its shared packages
// (plugin/internal/...) and anything outside the plugin.
func verb(path string) string {
	rel, ok := strings.CutPrefix(path, module+"/plugin/")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rel, "/")
	if v == "internal" {
		return ""
	}
	return v
}

// checkVerbsApart: no verb imports another; what two verbs share lives in
// plugin/internal/..., and only the plugin's root imports the verbs.
func checkVerbsApart(t *testing.T, pkgs []goPackage) {
	t.Helper()
	for _, p := range pkgs {
		from := verb(p.ImportPath)
		if from == "" {
			continue
		}
		for _, imp := range p.Imports {
			if to := verb(imp); to != "" && to != from {
				t.Errorf("the verb package %s imports the verb package %s: move what they share to plugin/internal", p.ImportPath, imp)
			}
		}
	}
}

// membershipControllers are the reconcilers of the group's membership. What the plugin
// needs of them (which credential a connection uses, the departures) is a pure decision
// of the planner (reconciler/planner/members), or the sealing of package
// reconciler/credentials/seal.
var membershipControllers = []string{
	module + "/reconciler/bootstrap",
	module + "/reconciler/clusters",
	module + "/reconciler/credentials",
	module + "/reconciler/membership",
}

// checkPluginOffTheControllers: no plugin package imports a membership controller; it
// calls the planner they call instead.
func checkPluginOffTheControllers(t *testing.T, pkgs []goPackage) {
	t.Helper()
	for _, p := range pkgs {
		if layer(p.ImportPath) != 3 {
			continue
		}
		for _, imp := range p.Imports {
			if slices.Contains(membershipControllers, imp) {
				t.Errorf("the plugin package %s imports the controller %s: call the planner (reconciler/planner/members) instead", p.ImportPath, imp)
			}
		}
	}
}

// engine is the sync engine, whose parts are the packages below it.
const engine = module + "/reconciler/engine"

// engineParts are the packages of the sync engine's parts, each with the other parts it
// may import: the views (the informers), the writer and the rules' status. The engine
// imports them and calls them through small interfaces; none imports the engine, so the
// path of an event leaves the views for the engine, and the engine for the writer, and
// never comes back. A new part is added here, with what it may import and why.
var engineParts = map[string][]string{
	// views reads through the writer's resource paths, which the writes use too.
	engine + "/views":      {engine + "/writer"},
	engine + "/writer":     nil,
	engine + "/rulestatus": nil,
}

// checkEngineParts: every package below reconciler/engine is a part (engineParts), the
// engine imports each of them, and a part imports neither the engine nor a part it is
// not allowed.
func checkEngineParts(t *testing.T, pkgs []goPackage) {
	t.Helper()
	imported := map[string]bool{}
	for _, p := range pkgs {
		if p.ImportPath == engine {
			for _, imp := range p.Imports {
				imported[imp] = true
			}
		}
	}
	for _, p := range pkgs {
		if !under(p.ImportPath, "reconciler/engine") || p.ImportPath == engine {
			continue
		}
		allowed, ok := engineParts[p.ImportPath]
		if !ok {
			t.Errorf("%s is below the engine but not one of its parts: add it to engineParts", p.ImportPath)
			continue
		}
		if !imported[p.ImportPath] {
			t.Errorf("the engine does not import its part %s", p.ImportPath)
		}
		for _, imp := range p.Imports {
			switch {
			case imp == engine:
				t.Errorf("the engine's part %s imports the engine: the engine calls it, not the other way", p.ImportPath)
			case under(imp, "reconciler/engine") && !slices.Contains(allowed, imp):
				t.Errorf("the engine's part %s imports the part %s, which engineParts does not allow", p.ImportPath, imp)
			}
		}
	}
	for part := range engineParts {
		if !slices.ContainsFunc(pkgs, func(p goPackage) bool { return p.ImportPath == part }) {
			t.Errorf("the engine's part %s does not exist: remove it from engineParts", part)
		}
	}
}
