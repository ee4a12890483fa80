package version

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestControllers: version --contexts prints each context's controller as its local
// Cluster reports it, warns on stderr of the pairs further apart than the supported skew
// (this plugin included), and fails after printing when a context cannot be read.
func TestControllers(t *testing.T) {
	f := kubefake.New(nil)
	member := func(ctx string, id types.UID, version string) {
		ks := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: id}}
		own := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: ctx}, Spec: v1alpha1.ClusterSpec{ClusterID: id},
			Status: v1alpha1.ClusterStatus{Type: v1alpha1.ClusterTypeLocal, ControllerVersion: version}}
		peer := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: v1alpha1.ClusterSpec{ClusterID: "id-other"},
			Status: v1alpha1.ClusterStatus{ControllerVersion: "v9.9.9"}}
		c := f.Add(ctx, ks, own, peer)
		c.Kubernetes = k8sfake.NewClientset(ks.DeepCopy())
	}
	member("east", "id-east", "v0.3.1")
	member("west", "id-west", "v0.4.0")
	member("north", "id-north", "v0.6.0")
	member("seed", "id-seed", "")
	f.Add("down").Err = errors.New("connection refused")

	for _, tc := range []struct {
		name, output string
		want         string
	}{
		{name: "table", want: `kubectl-registry v0.4.2 (commit 0123abc, built 2026-01-02T03:04:05Z, go1.26.8, linux/amd64)

CONTEXT   CLUSTER   CONTROLLER
east      east      v0.3.1
west      west      v0.4.0
north     north     v0.6.0
seed      seed      <none>
down      <none>    ?
`},
		{name: "json", output: "json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			o := &Options{IOStreams: streams, Factory: f, Output: tc.output, Contexts: []string{"east", "west", "north", "seed", "down"}}
			o.Info = testInfo
			o.Info.Version = "v0.4.2"
			err := o.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "down") {
				t.Errorf("Run = %v, want the unreadable context's error", err)
			}
			if tc.want != "" {
				if diff := cmp.Diff(tc.want, out.String()); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
			} else if !strings.Contains(out.String(), `"version": "v0.6.0"`) || !strings.Contains(out.String(), `"client": {`) {
				t.Errorf("json output:\n%s", out.String())
			}
			warnings := errOut.String()
			for _, want := range []string{
				"Warning: this plugin and the controller of north: v0.4.2 and v0.6.0 are 2 minor versions apart",
				"Warning: the controllers of east and north: v0.3.1 and v0.6.0 are 3 minor versions apart",
			} {
				if !strings.Contains(warnings, want) {
					t.Errorf("stderr does not say %q:\n%s", want, warnings)
				}
			}
			if strings.Contains(warnings, "east and west") || strings.Contains(warnings, "seed") {
				t.Errorf("a warning for versions within the skew, or for a controller reporting none:\n%s", warnings)
			}
		})
	}
}
