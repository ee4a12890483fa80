package membership

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestWriteRacesOtherWriters: the membership updates its copies with patches of the fields
// it changed, so a write of other fields between its read and its write (the cluster
// status reconciler's status, an admin's annotation) neither makes it conflict nor is
// lost.
func TestWriteRacesOtherWriters(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	moved := func(o client.Object) {
		c := o.(*v1alpha1.Cluster)
		c.Spec.KubernetesAPIEndpoints[0].ServerAddress = "https://x.moved.example:6443"
	}
	renewed := sec("x", 20)

	tests := []struct {
		name string
		// local is the copy this cluster holds; peer is what x publishes now.
		local, peer client.Object
		// race writes other fields of the local object after the membership read it.
		race func(t *testing.T, c client.Client, o client.Object)
		obj  func() client.Object
		// got returns the fields compared with want after the membership's write.
		got  func(o client.Object) []any
		want []any
	}{
		{
			name:  "Cluster spec while the status is written",
			local: cl("x", idX, mark(idX)),
			peer:  cl("x", idX, moved),
			race: func(t *testing.T, c client.Client, o client.Object) {
				cur := o.DeepCopyObject().(*v1alpha1.Cluster)
				cur.Status.State = v1alpha1.ClusterStateReady
				cur.Status.Message = "reachable"
				if err := c.Status().Update(t.Context(), cur); err != nil {
					t.Fatal(err)
				}
			},
			obj:  func() client.Object { return &v1alpha1.Cluster{} },
			want: []any{"https://x.moved.example:6443", v1alpha1.ClusterStateReady, "reachable"},
			got: func(o client.Object) []any {
				c := o.(*v1alpha1.Cluster)
				return []any{c.Spec.KubernetesAPIEndpoints[0].ServerAddress, c.Status.State, c.Status.Message}
			},
		},
		{
			name:  "reader Secret while an admin annotates it",
			local: sec("x", 10, mark(idX)),
			peer:  renewed,
			race: func(t *testing.T, c client.Client, o client.Object) {
				cur := o.DeepCopyObject().(*corev1.Secret)
				cur.Annotations["note"] = "rotated by hand"
				if err := c.Update(t.Context(), cur); err != nil {
					t.Fatal(err)
				}
			},
			obj:  func() client.Object { return &corev1.Secret{} },
			want: []any{string(renewed.Data[v1alpha1.KubeconfigKey]), at(20), "rotated by hand"},
			got: func(o client.Object) []any {
				s := o.(*corev1.Secret)
				return []any{string(s.Data[v1alpha1.KubeconfigKey]), s.Annotations[v1alpha1.TokenExpiresAtAnnotation], s.Annotations["note"]}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).
				WithObjects(tt.local).WithStatusSubresource(&v1alpha1.Cluster{}).Build()
			read := tt.obj()
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(tt.local), read); err != nil {
				t.Fatal(err)
			}
			in := Input{LocalID: idL, LocalName: "l", Namespace: ns}
			view := View{Name: "x", ClusterID: idX, Clusters: []v1alpha1.Cluster{*cl("x", idX)}, Secrets: []corev1.Secret{*sec("x", 10)}}
			switch o := read.(type) {
			case *v1alpha1.Cluster:
				in.Local.Clusters = []v1alpha1.Cluster{*o}
				view.Clusters = []v1alpha1.Cluster{*tt.peer.(*v1alpha1.Cluster)}
			case *corev1.Secret:
				in.Local.Secrets = []corev1.Secret{*o}
				in.Local.Clusters = []v1alpha1.Cluster{*cl("x", idX, mark(idX))}
				view.Secrets = []corev1.Secret{*tt.peer.(*corev1.Secret)}
			}
			in.Peers = []View{view}
			var writes []Write
			for _, w := range Plan(in).Writes {
				if w.Op == OpUpdate && w.Object.GetName() == "x" && kindOf(w.Object) == kindOf(read) {
					writes = append(writes, w)
				}
			}
			if len(writes) != 1 {
				t.Fatalf("the plan has %d updates of the local copy, want 1: %+v", len(writes), Plan(in).Writes)
			}

			tt.race(t, c, read)

			r := &Reconciler{Client: c, Namespace: ns}
			if err := r.write(t.Context(), writes[0]); err != nil {
				t.Fatalf("writing the copy after another writer: %v", err)
			}
			after := tt.obj()
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(tt.local), after); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, tt.got(after)); diff != "" {
				t.Errorf("after both writes (-want +got):\n%s", diff)
			}
		})
	}
}
