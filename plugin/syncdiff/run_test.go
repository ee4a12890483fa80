package syncdiff

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// fakePair returns the in-memory clusters a and b of a group of two, each with its
// kube-system namespace (its ID) and both Clusters; b has the rule configmaps, and a
// the ConfigMap diff-test/one it matches.
func fakePair(t *testing.T) *kubefake.Factory {
	t.Helper()
	f := kubefake.New(nil)
	ks := func(id string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: types.UID("id-" + id)}}
	}
	clusterOf := func(name string) *v1alpha1.Cluster {
		c := cluster(name, types.UID("id-"+name))
		return &c
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "diff-test"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "diff-test"}, Data: map[string]string{"k": "v"}}
	if _, err := f.AddServed("a", ks("a"), ns.DeepCopy(), clusterOf("a"), clusterOf("b"), cm); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AddServed("b", ks("b"), ns.DeepCopy(), clusterOf("a"), clusterOf("b"), cmRule.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	f.Current = "b"
	return f
}

// TestRunFake diffs b of an in-memory group through the real command: the copy of a's
// ConfigMap that b's rule would create is a difference (exit 1), shown as YAML with
// -o yaml; limited to another rule, nothing differs (exit 0).
func TestRunFake(t *testing.T) {
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return plugintest.Command{New: []plugintest.NewCmd{newCmd}, Factory: fakePair(t)}.Exit(t, append([]string{"sync-diff"}, args...)...)
	}
	out, errOut, code := run()
	if code != cmdutil.ExitCodeDifferences {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, cmdutil.ExitCodeDifferences, errOut)
	}
	want := "cluster b (context b): 1 create, 0 unchanged\n  create    ConfigMap diff-test/one (rule configmaps, from a)\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}

	out, errOut, code = run("-o", "yaml")
	if code != cmdutil.ExitCodeDifferences || !strings.Contains(out, "action: create") {
		t.Errorf("-o yaml: exit code %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	out, errOut, code = run("secrets")
	if diff := cmp.Diff("cluster b (context b): 0 unchanged\n", out); diff != "" || code != 0 || errOut != "" {
		t.Errorf("limited to another rule: exit code %d, stderr %q, stdout (-want +got):\n%s", code, errOut, diff)
	}
}

// newCmd is NewCmdSyncDiff as plugintest builds verbs: over a kube.Factory, of which
// sync-diff uses the client-go part.
func newCmd(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return NewCmdSyncDiff(f, streams)
}
