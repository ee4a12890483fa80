package v1alpha1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGeneratedFilesAreFresh regenerates the deepcopy code and the CRD manifests with
// the controller-gen pinned in go.mod (as `make generate` does) into a temporary
// directory and fails when the checked-in files differ: run `make generate`.
func TestGeneratedFilesAreFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping controller-gen")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	root := moduleRoot(t, goBin)
	out := t.TempDir()
	cmd := exec.Command(goBin, "run", "sigs.k8s.io/controller-tools/cmd/controller-gen",
		"object", "paths=./reconciler/api/...", "output:object:dir="+out,
		"crd", "output:crd:artifacts:config="+filepath.Join(out, "crds"))
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, b)
	}

	pairs := map[string]string{
		filepath.Join(out, "zz_generated.deepcopy.go"): filepath.Join(root, "reconciler", "api", "v1alpha1", "zz_generated.deepcopy.go"),
	}
	crds, err := filepath.Glob(filepath.Join(out, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// One CRD per kind of the API.
	var names []string
	for _, f := range crds {
		names = append(names, filepath.Base(f))
	}
	wantNames := []string{
		"clusterregistry.k8s.cisco.com_clusterfeatures.yaml",
		"clusterregistry.k8s.cisco.com_clusters.yaml",
		"clusterregistry.k8s.cisco.com_resourcesyncrules.yaml",
		"clusterregistry.k8s.cisco.com_syncpolicies.yaml",
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Fatalf("controller-gen's CRDs (-want +got):\n%s", diff)
	}
	checkedIn, _ := filepath.Glob(filepath.Join(root, "manifests", "crds", "*.yaml"))
	if len(checkedIn) != len(crds) {
		t.Errorf("manifests/crds holds %d files, controller-gen writes %d: run make generate", len(checkedIn), len(crds))
	}
	for _, f := range crds {
		pairs[f] = filepath.Join(root, "manifests", "crds", filepath.Base(f))
	}
	for fresh, current := range pairs {
		want, err := os.ReadFile(fresh)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(current)
		if err != nil {
			t.Errorf("%s: %v (run make generate)", current, err)
			continue
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s is stale, run make generate (-generated +checked in):\n%s", current, cmp.Diff(string(want), string(got)))
		}
	}
}

func moduleRoot(t *testing.T, goBin string) string {
	t.Helper()
	b, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(b))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside the module")
	}
	return filepath.Dir(gomod)
}
