package membership

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
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
	const ns = v1alpha1.DefaultNamespace
	copyOfX := map[string]string{v1alpha1.OwnershipAnnotation: "uid-x"}
	localCluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: copyOfX},
		Spec: v1alpha1.ClusterSpec{ClusterID: "uid-x", KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: "https://x.example:6443"}}}}
	localSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x", Annotations: map[string]string{
		v1alpha1.OwnershipAnnotation: "uid-x", v1alpha1.TokenExpiresAtAnnotation: "2026-01-01T10:00:00Z"}},
		Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.KubeconfigKey: []byte("old")}}
	// moved and renewed are what the membership plan writes: x moved its API server, and
	// x's reader token was renewed.
	moved := func(o client.Object) client.Object {
		c := o.DeepCopyObject().(*v1alpha1.Cluster)
		c.Spec.KubernetesAPIEndpoints[0].ServerAddress = "https://x.moved.example:6443"
		return c
	}
	renewed := func(o client.Object) client.Object {
		s := o.DeepCopyObject().(*corev1.Secret)
		s.Data[v1alpha1.KubeconfigKey] = []byte("renewed")
		s.Annotations[v1alpha1.TokenExpiresAtAnnotation] = "2026-01-01T20:00:00Z"
		return s
	}

	tests := []struct {
		name string
		// local is the copy this cluster holds; update makes the membership's new version.
		local  client.Object
		update func(client.Object) client.Object
		// race writes other fields of the local object after the membership read it.
		race func(t *testing.T, c client.Client, o client.Object)
		obj  func() client.Object
		// got returns the fields compared with want after the membership's write.
		got  func(o client.Object) []any
		want []any
	}{
		{
			name:   "Cluster spec while the status is written",
			local:  localCluster,
			update: moved,
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
			name:   "reader Secret while an admin annotates it",
			local:  localSecret,
			update: renewed,
			race: func(t *testing.T, c client.Client, o client.Object) {
				cur := o.DeepCopyObject().(*corev1.Secret)
				cur.Annotations["note"] = "rotated by hand"
				if err := c.Update(t.Context(), cur); err != nil {
					t.Fatal(err)
				}
			},
			obj:  func() client.Object { return &corev1.Secret{} },
			want: []any{"renewed", "2026-01-01T20:00:00Z", "rotated by hand"},
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
			// The write the membership plan makes: a patch from what it read to what it wants.
			w := members.Write{Op: members.OpUpdate, Base: read.DeepCopyObject().(client.Object), Object: tt.update(read), From: "x", Describes: "uid-x"}

			tt.race(t, c, read)

			r := &Reconciler{Client: c, Namespace: ns}
			if err := r.write(t.Context(), w); err != nil {
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
