package peers

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/simpeer"
)

// TestPeerCachesHoldWhatDecisionsRead: connected to two peers served over HTTPS, the
// membership caches hold each peer's own Cluster with its status, the other members'
// Clusters without theirs, the credential the peer issued this cluster whole, nothing of
// the credentials it issued another member and received from it, and one copy of the
// reader kubeconfig and CA bundle both peers relay alike, of the maps of their
// annotations and data, and of the relayed Cluster and reader Secret themselves; and the
// two peers' REST mappers share their mappings.
func TestPeerCachesHoldWhatDecisionsRead(t *testing.T) {
	g, err := simpeer.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	relayed, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: "south", Server: "https://127.0.0.1:1", CAData: g.CAData(), Token: "south-token"})
	if err != nil {
		t.Fatal(err)
	}
	m := startManager(t, kubeconfig.AddressPolicy{AllowLoopback: true})
	names := []string{"east", "west"}
	for _, name := range names {
		srv := startSimPeer(t, g, name, simpeer.Options{})
		serve(t, srv, simpeer.Clusters, servedCluster(name, v1alpha1.ClusterTypeLocal, g.CAData()))
		serve(t, srv, simpeer.Clusters, servedCluster("south", v1alpha1.ClusterTypePeer, g.CAData()))
		serve(t, srv, simpeer.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "south", Namespace: v1alpha1.DefaultNamespace}, Data: map[string][]byte{v1alpha1.KubeconfigKey: bytes.Clone(relayed)}})
		for _, sealed := range sealedCredentials() {
			serve(t, srv, simpeer.Secrets, sealed)
		}
		ensureSimPeer(t, m, g, srv, name, false)
	}

	var kubeconfigs, caBundles [][]byte
	var relayedClusters, ownClusters []*v1alpha1.Cluster
	var relayedSecrets []*corev1.Secret
	var mappings []*mappings
	var annotations []map[string]string
	var data []map[string][]byte
	for _, name := range names {
		p := waitSynced(t, m, name)
		ctx := context.Background()
		var own, other v1alpha1.Cluster
		if err := p.Reader().Get(ctx, client.ObjectKey{Name: name}, &own); err != nil {
			t.Fatal(err)
		}
		if err := p.Reader().Get(ctx, client.ObjectKey{Name: "south"}, &other); err != nil {
			t.Fatal(err)
		}
		if own.Status.Type != v1alpha1.ClusterTypeLocal || own.Status.ControllerVersion != "v1" || len(own.Status.Conditions) != 1 {
			t.Errorf("%s: the peer's own Cluster lost its status: %+v", name, own.Status)
		}
		if other.Status.Type != "" || len(other.Status.Conditions) != 0 {
			t.Errorf("%s: the status %s writes of another member is held: %+v", name, name, other.Status)
		}
		if other.Spec.ClusterID != "uid-south" || len(other.Spec.KubernetesAPIEndpoints) != 1 || other.Annotations["a"] != "v" {
			t.Errorf("%s: the other member's Cluster lost what the planner copies: %+v", name, other)
		}
		// Of the sealed credentials, only the one issued to this cluster is read.
		var received, mine corev1.Secret
		for _, key := range []client.ObjectKey{{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.IssuedReaderSecretName("uid-south")}, {Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.ReceivedReaderSecretName("uid-south")}} {
			if err := p.Reader().Get(ctx, key, &received); !apierrors.IsNotFound(err) {
				t.Errorf("%s: a credential of another member is read (%v): %+v", name, err, received)
			}
		}
		if err := p.Reader().Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.IssuedReaderSecretName("local")}, &mine); err != nil {
			t.Errorf("%s: the credential issued to this cluster: %v", name, err)
		} else if string(mine.Data[v1alpha1.SealedKubeconfigKey]) != "sealed" || mine.Labels[v1alpha1.ReaderForLabel] != "local" {
			t.Errorf("%s: the credential issued to this cluster is not held whole: %+v", name, mine)
		}
		// The informers' own objects, not the reader's copies.
		secret := informerObject[*corev1.Secret](t, p, &corev1.Secret{}, v1alpha1.DefaultNamespace+"/south")
		cluster := informerObject[*v1alpha1.Cluster](t, p, &v1alpha1.Cluster{}, "/south")
		kubeconfigs = append(kubeconfigs, secret.Data[v1alpha1.KubeconfigKey])
		caBundles = append(caBundles, cluster.Spec.KubernetesAPIEndpoints[0].CABundle)
		annotations = append(annotations, cluster.Annotations)
		data = append(data, secret.Data)
		relayedClusters, relayedSecrets = append(relayedClusters, cluster), append(relayedSecrets, secret)
		ownClusters = append(ownClusters, informerObject[*v1alpha1.Cluster](t, p, &v1alpha1.Cluster{}, "/"+name))
		if vm, ok := p.Mapper().(*versionMapper); ok {
			vm.mu.Lock()
			mappings = append(mappings, vm.current)
			vm.mu.Unlock()
		}
	}
	if relayedClusters[0] != relayedClusters[1] || relayedSecrets[0] != relayedSecrets[1] {
		t.Error("the two peers' caches do not hold one object of the relayed Cluster and reader Secret")
	}
	if len(mappings) != 2 || mappings[0] != mappings[1] {
		t.Error("the two peers' REST mappers, of the same resources, do not share their mappings")
	}
	if ownClusters[0] == ownClusters[1] {
		t.Error("the peers' own Clusters are one object")
	}
	if !bytes.Equal(kubeconfigs[0], relayed) || &kubeconfigs[0][0] != &kubeconfigs[1][0] {
		t.Error("the two peers' copies of the relayed kubeconfig are not one")
	}
	if &caBundles[0][0] != &caBundles[1][0] {
		t.Error("the two peers' copies of the CA bundle are not one")
	}
	if reflect.ValueOf(annotations[0]).UnsafePointer() != reflect.ValueOf(annotations[1]).UnsafePointer() {
		t.Error("the two peers' copies of the relayed Cluster's annotations are not one map")
	}
	if reflect.ValueOf(data[0]).UnsafePointer() != reflect.ValueOf(data[1]).UnsafePointer() {
		t.Error("the two peers' copies of the relayed reader Secret's data are not one map")
	}
}

// sealedCredentials are the sealed credentials a peer holds beside its reader Secrets:
// those it issued this cluster ("local", startManager's) and another member (south), and
// the one it received from south.
func sealedCredentials() []*corev1.Secret {
	sealed := func(name, label, key string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1alpha1.DefaultNamespace, Labels: map[string]string{label: key}},
			Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("sealed")}}
	}
	return []*corev1.Secret{
		sealed(v1alpha1.IssuedReaderSecretName("local"), v1alpha1.ReaderForLabel, "local"),
		sealed(v1alpha1.IssuedReaderSecretName("uid-south"), v1alpha1.ReaderForLabel, "uid-south"),
		sealed(v1alpha1.ReceivedReaderSecretName("uid-south"), v1alpha1.ReaderFromLabel, "uid-south"),
	}
}

// TestPeerSecretsRead: the Secrets a peer's reader lists and gets, as a decision reads
// them: with a reader of its own, its reader Secrets and the credential it issued this
// cluster, once; with its bootstrap credential, that credential only; from a peer that
// ignores the selectors (a hostile one's server, which serves every Secret both to the
// membership cache and to the watch of that credential), every Secret once, the
// credentials issued and received between other members only as stubs, and the one
// issued to this cluster whole.
func TestPeerSecretsRead(t *testing.T) {
	g, err := simpeer.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	mine := v1alpha1.IssuedReaderSecretName("local")
	tests := []struct {
		name            string
		bootstrap       bool
		ignoreSelectors bool
		want            []string
	}{
		{name: "a reader of its own", want: []string{mine, "west"}},
		{name: "the bootstrap credential", bootstrap: true, want: []string{mine}},
		{name: "a peer that ignores the selectors", ignoreSelectors: true,
			want: []string{mine, v1alpha1.IssuedReaderSecretName("uid-south"), v1alpha1.ReceivedReaderSecretName("uid-south"), "west"}},
		{name: "the bootstrap credential, a peer that ignores the selectors", bootstrap: true, ignoreSelectors: true, want: []string{mine}},
	}
	m := startManager(t, kubeconfig.AddressPolicy{AllowLoopback: true})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("peer%d", i)
			srv := startSimPeer(t, g, name, simpeer.Options{IgnoreSelectors: tt.ignoreSelectors})
			reader := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "west", Namespace: v1alpha1.DefaultNamespace}, Data: map[string][]byte{v1alpha1.KubeconfigKey: []byte("kubeconfig")}}
			for _, s := range append(sealedCredentials(), reader) {
				serve(t, srv, simpeer.Secrets, s)
			}
			ensureSimPeer(t, m, g, srv, name, tt.bootstrap)
			rd := waitSynced(t, m, name).Reader()
			ctx := context.Background()
			var list corev1.SecretList
			if err := rd.List(ctx, &list, client.InNamespace(v1alpha1.DefaultNamespace)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range list.Items {
				got = append(got, s.Name)
				if sealed := len(s.Data) > 0 && len(s.Data[v1alpha1.KubeconfigKey]) == 0; sealed != (s.Name == mine) {
					t.Errorf("Secret %s held with data %v", s.Name, s.Data)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Secrets listed (-want +got):\n%s", diff)
			}
			var issued corev1.Secret
			if err := rd.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: mine}, &issued); err != nil || string(issued.Data[v1alpha1.SealedKubeconfigKey]) != "sealed" {
				t.Errorf("the credential issued to this cluster: %v, %+v", err, issued)
			}
			var other corev1.Secret
			err := rd.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "west"}, &other)
			if slices.Contains(tt.want, "west") != (err == nil) {
				t.Errorf("getting the reader Secret west: %v", err)
			}
		})
	}
}

// startSimPeer starts a simulated peer of g, cluster ID "uid-"+name and token
// readerToken (peerOf's), with opts, until the test ends.
func startSimPeer(t *testing.T, g *simpeer.Group, name string, opts simpeer.Options) *simpeer.Server {
	t.Helper()
	opts.UID, opts.Token = types.UID("uid-"+name), readerToken
	srv, err := g.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// serve makes srv serve obj as a resource r.
func serve(t *testing.T, srv *simpeer.Server, r simpeer.Resource, obj runtime.Object) {
	t.Helper()
	write(t, srv.Create, r, obj)
}

// write writes obj as a resource r with op, a simulated peer's Create or Update.
func write(t *testing.T, op func(simpeer.Resource, map[string]any) (string, error), r simpeer.Resource, obj runtime.Object) {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op(r, u); err != nil {
		t.Fatal(err)
	}
}

// ensureSimPeer connects m to srv, the simulated peer name (its Cluster and reader
// Secret are peerOf's), read with its bootstrap credential or with a reader of its own.
func ensureSimPeer(t *testing.T, m *Manager, g *simpeer.Group, srv *simpeer.Server, name string, bootstrap bool) {
	t.Helper()
	c, s := peerOf(t, name, srv.URL(), g.CAData())
	m.Ensure(c, s, bootstrap)
}

// servedCluster is the Cluster name as a peer serves it, of type typ, with a status.
func servedCluster(name string, typ v1alpha1.ClusterType, ca []byte) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"a": "v"}},
		Spec: v1alpha1.ClusterSpec{ClusterID: types.UID("uid-" + name),
			KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: "https://127.0.0.1:1", CABundle: bytes.Clone(ca)}}},
		Status: v1alpha1.ClusterStatus{Type: typ, State: v1alpha1.ClusterStateReady, ControllerVersion: "v1",
			Conditions: []v1alpha1.ClusterCondition{{Type: v1alpha1.ClusterConditionReady, Status: corev1.ConditionTrue, Reason: "Ready", Message: "ready"}}},
	}
}

// waitSynced waits for the named peer to be Ready with its cache synced.
func waitSynced(t *testing.T, m *Manager, name string) Peer {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, _ := m.Get(name)
		if p.Ready && p.Synced && p.Reader() != nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("peer %s is not Ready and synced: %+v", name, p)
		}
	}
}

// informerObject returns the object key as the peer's informer of kind holds it (what its
// event handlers are given), not a reader's copy.
func informerObject[T client.Object](t *testing.T, p Peer, kind client.Object, key string) T {
	t.Helper()
	cch, ok := p.Reader().(cache.Cache)
	if !ok {
		t.Fatalf("the reader of %s is not a cache", p.Name)
	}
	inf, err := cch.GetInformer(context.Background(), kind)
	if err != nil {
		t.Fatal(err)
	}
	found := make(chan T, 1)
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if o, ok := obj.(T); ok && o.GetNamespace()+"/"+o.GetName() == key {
			found <- o
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	select {
	case o := <-found:
		return o
	case <-time.After(10 * time.Second):
		t.Fatalf("%s of %s not found", key, p.Name)
		panic("unreachable")
	}
}
