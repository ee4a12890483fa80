package membership

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

// views stands in for the peer connections.
type views []peers.Peer

func (v views) List() []peers.Peer                { return v }
func (views) Subscribe(chan<- event.GenericEvent) {}

// TestReconcile runs the membership reconciler on fake clients: the local cluster and
// its peers' views (the connections' caches), without API servers.
func TestReconcile(t *testing.T) {
	const ns = v1alpha1.DefaultNamespace
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// Every server is a loopback address, which the reconciler's address policy (the
	// default) refuses: nothing is dialled.
	servers := map[string]string{"l": "https://127.0.0.1:1", "x": "https://127.0.0.2:1", "y": "https://127.0.0.3:1"}
	own := func(name string, id types.UID) []client.Object {
		kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: name, Server: servers[name], Token: "token-of-" + name})
		if err != nil {
			t.Fatal(err)
		}
		return []client.Object{
			&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{ClusterID: id,
				AuthInfo:               v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: name, Namespace: ns}},
				KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: servers[name]}}}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: v1alpha1.SecretTypeClusterRegistry,
				Data: map[string][]byte{v1alpha1.KubeconfigKey: kc}},
		}
	}
	view := func(objs ...client.Object) client.Reader {
		return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	}
	// copies marks objects as the membership's copies of cluster id.
	copies := func(id types.UID, objs []client.Object) []client.Object {
		for _, o := range objs {
			o.SetAnnotations(map[string]string{v1alpha1.OwnershipAnnotation: string(id)})
			o.SetLabels(map[string]string{v1alpha1.OwnershipLabel: string(id)})
		}
		return objs
	}
	failCreates := interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		return errors.New("etcd is down")
	}}

	tests := []struct {
		name  string
		local []client.Object // besides the local cluster's own Cluster and Secret
		peers views
		funcs interceptor.Funcs
		// want are the Clusters and Secrets of the local cluster after one reconcile, with
		// the cluster ID they are marked with ("" for the local cluster's own).
		want    map[string]string
		wantErr bool
	}{
		{
			name:  "a Ready peer's own Cluster and Secret are copied, marked with its ID",
			peers: views{peers.Connected("x", "uid-x", view(own("x", "uid-x")...))},
			want:  map[string]string{"Cluster/l": "", "Secret/l": "", "Cluster/x": "uid-x", "Secret/x": "uid-x"},
		},
		{
			name:  "a peer that is not Ready teaches nothing and loses nothing",
			local: copies("uid-x", own("x", "uid-x")),
			peers: views{
				{Name: "x", ClusterID: "uid-x", State: v1alpha1.ClusterStateFailed},
			},
			want: map[string]string{"Cluster/l": "", "Secret/l": "", "Cluster/x": "uid-x", "Secret/x": "uid-x"},
		},
		{
			name:  "a member a Ready peer knows is not learnt without verifying its Secret against its server",
			peers: views{peers.Connected("x", "uid-x", view(append(own("x", "uid-x"), own("y", "uid-y")...)...))},
			want:  map[string]string{"Cluster/l": "", "Secret/l": "", "Cluster/x": "uid-x", "Secret/x": "uid-x"},
		},
		{
			name:    "a write that fails is returned, not dropped",
			peers:   views{peers.Connected("x", "uid-x", view(own("x", "uid-x")...))},
			funcs:   failCreates,
			want:    map[string]string{"Cluster/l": "", "Secret/l": ""},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(own("l", "uid-l"), tt.local...)...).WithInterceptorFuncs(tt.funcs).Build()
			r := &Reconciler{Client: local, Identity: issue.Identity{Name: "l", ID: "uid-l"}, Peers: tt.peers, Namespace: ns}
			_, err := r.Reconcile(t.Context(), reconcile.Request{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Reconcile: %v, want an error: %t", err, tt.wantErr)
			}
			got := map[string]string{}
			var cs v1alpha1.ClusterList
			var ss corev1.SecretList
			if err := local.List(t.Context(), &cs); err != nil {
				t.Fatal(err)
			}
			if err := local.List(t.Context(), &ss, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, c := range cs.Items {
				got["Cluster/"+c.Name] = c.Annotations[v1alpha1.OwnershipAnnotation]
			}
			for _, s := range ss.Items {
				got["Secret/"+s.Name] = s.Annotations[v1alpha1.OwnershipAnnotation]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("local Clusters and Secrets (-want +got):\n%s", diff)
			}
		})
	}
}
