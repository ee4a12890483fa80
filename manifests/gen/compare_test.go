package main

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/plugin"
)

// newRegistryCmd returns the root command of "kubectl registry", writing to out and errOut.
func newRegistryCmd(out, errOut io.Writer) *cobra.Command {
	return plugin.NewCmdRegistry(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut})
}

// installDryRun runs "kubectl registry install --dry-run=client -o yaml" with args, as a
// user does, and returns the objects it prints.
func installDryRun(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, err := runRegistry(ctx, append([]string{"install", "--dry-run=client", "-o", "yaml"}, args...)...)
	if err != nil {
		t.Fatalf("kubectl registry install %v: %v\n%s", args, err, errOut)
	}
	objs, err := manifests.Decode([]byte(out))
	if err != nil {
		t.Fatalf("decoding the output of install %v: %v", args, err)
	}
	return objs
}

// byKey returns the objects keyed by group, kind, namespace and name, so that two
// renderings compare whatever their order; a key seen twice fails the test.
func byKey(t *testing.T, what string, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	m := make(map[string]map[string]any, len(objs))
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		key := gvk.Group + "/" + gvk.Version + "/" + gvk.Kind + " " + obj.GetNamespace() + "/" + obj.GetName()
		if _, dup := m[key]; dup {
			t.Fatalf("%s renders %s twice", what, key)
		}
		m[key] = obj.Object
	}
	return m
}

// compareObjects fails the test when got and want do not hold the same objects, with a
// diff of each object that differs.
func compareObjects(t *testing.T, what string, want, got []*unstructured.Unstructured) {
	t.Helper()
	w, g := byKey(t, "install", want), byKey(t, what, got)
	for _, key := range slices.Sorted(maps.Keys(w)) {
		if _, ok := g[key]; !ok {
			t.Errorf("%s lacks %s, which install renders", what, key)
			continue
		}
		if diff := cmp.Diff(w[key], g[key]); diff != "" {
			t.Errorf("%s renders %s unlike install --dry-run=client -o yaml (-install +%s):\n%s", what, key, what, diff)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(g)) {
		if _, ok := w[key]; !ok {
			t.Errorf("%s renders %s, which install does not", what, key)
		}
	}
}
