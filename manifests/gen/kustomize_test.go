package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kubectl-registry/kubectl-registry/manifests"
)

// installDoc is the document that shows the kustomize overlay TestKustomizeOverlay builds.
const installDoc = "../../docs/install.md"

// kustomizeBuild builds the kustomization in dir as kubectl kustomize does.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	data, err := rm.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	objs, err := manifests.Decode(data)
	if err != nil {
		t.Fatalf("decoding kustomize build %s: %v", dir, err)
	}
	return objs
}

// TestKustomizeBaseEqualsInstall builds the base and compares it with what install
// applies with its defaults.
func TestKustomizeBaseEqualsInstall(t *testing.T) {
	compareObjects(t, "kustomize build manifests/kustomize", installDryRun(t), kustomizeBuild(t, filepath.Join(manifestsDir, kustomizeDir)))
}

// overlayBlock finds the overlay of the docs: the yaml block that is a Kustomization.
var overlayBlock = regexp.MustCompile("(?s)```yaml\n(apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n.*?)```")

// remoteBase matches the remote bases of the docs' overlay.
var remoteBase = regexp.MustCompile(`https://github.com/kubectl-registry/kubectl-registry//manifests/([a-z/-]+)\?ref=\S+`)

// TestKustomizeOverlay builds the overlay docs/install.md shows, with its remote bases
// replaced by the committed ones, and compares it with install given the same settings
// as flags.
func TestKustomizeOverlay(t *testing.T) {
	doc, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := overlayBlock.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s shows no Kustomization in a yaml block", installDoc)
	}
	dir := writeOverlay(t, string(m[1]))
	want := installDryRun(t, "--cluster-name", "east", "--api-server-endpoint", "https://east.example.com:6443",
		"--image", "registry.example.com/team/kubectl-registry:v0.1.0", "--replicas", "2", "--monitoring")
	compareObjects(t, "the overlay of docs/install.md", want, kustomizeBuild(t, dir))
}

// TestKustomizeNoMemberGrants builds the base with the component of --member-grants=none
// and compares it with install --member-grants none.
func TestKustomizeNoMemberGrants(t *testing.T) {
	dir := writeOverlay(t, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- https://github.com/kubectl-registry/kubectl-registry//manifests/kustomize?ref=v0.1.0
components:
- https://github.com/kubectl-registry/kubectl-registry//manifests/kustomize/components/no-member-grants?ref=v0.1.0
`)
	compareObjects(t, "the base with components/no-member-grants", installDryRun(t, "--member-grants", "none"), kustomizeBuild(t, dir))
}

// writeOverlay writes kustomization (a kustomization.yaml whose bases are remote bases of
// this repository) into a new directory, the remote bases replaced by the committed ones,
// and returns the directory.
func writeOverlay(t *testing.T, kustomization string) string {
	t.Helper()
	abs, err := filepath.Abs(manifestsDir)
	if err != nil {
		t.Fatal(err)
	}
	// kustomize takes a base by a relative path only.
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	overlay := remoteBase.ReplaceAllStringFunc(kustomization, func(url string) string {
		return filepath.ToSlash(filepath.Join(rel, remoteBase.FindStringSubmatch(url)[1]))
	})
	if !strings.Contains(overlay, filepath.ToSlash(rel)) {
		t.Fatalf("the overlay uses no remote base of this repository:\n%s", kustomization)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
