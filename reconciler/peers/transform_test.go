package peers

import (
	"bytes"
	"maps"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestPeerSecrets: a peer's Secrets are cached without managedFields; a sealed
// credential issued to or received from another member only as a stub naming it (no
// data, labels or annotations); the credential issued to this cluster and reader Secrets
// in the clear whole.
func TestPeerSecrets(t *testing.T) {
	const local, other = "uid-local", "uid-other"
	sealed := map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte("blob")}
	inClear := map[string][]byte{v1alpha1.KubeconfigKey: []byte("apiVersion: v1")}
	secret := func(name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-" + types.UID(name), ResourceVersion: "7",
			Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "v"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Type: v1alpha1.SecretTypeClusterRegistry, Data: data}
	}
	whole := func(s *corev1.Secret) *corev1.Secret {
		s.ManagedFields = nil
		return s
	}
	stub := func(s *corev1.Secret) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion}}
	}
	tests := []struct {
		name string
		in   *corev1.Secret
		want func(*corev1.Secret) *corev1.Secret
	}{
		{"issued to this cluster", secret(v1alpha1.IssuedReaderSecretName(local), sealed), whole},
		{"issued to another member", secret(v1alpha1.IssuedReaderSecretName(other), sealed), stub},
		{"received from another member", secret(v1alpha1.ReceivedReaderSecretName(other), sealed), stub},
		{"a reader Secret in the clear", secret("west", inClear), whole},
	}
	transform := peerSecrets(local, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want(tt.in.DeepCopy())
			out, err := transform(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, out); diff != "" {
				t.Errorf("cached Secret (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPeerClusters: a peer's Clusters are cached without managedFields, and without the
// status the peer writes of other members and the bookkeeping its API server writes of
// them; its own Cluster keeps both, and its status, which the status reconciler reads
// (its metadata, controller version). Spec, labels and annotations, which the membership
// planner copies, are kept whole.
func TestPeerClusters(t *testing.T) {
	status := v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady, ControllerVersion: "v1",
		Conditions: []v1alpha1.ClusterCondition{{Type: v1alpha1.ClusterConditionReady, Status: corev1.ConditionTrue, Message: "ready"}}}
	cluster := func(typ v1alpha1.ClusterType) *v1alpha1.Cluster {
		st := *status.DeepCopy()
		st.Type = typ
		return &v1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: "west", Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "v"},
				UID: "uid-at-the-peer", ResourceVersion: "7", Generation: 2, CreationTimestamp: metav1.Unix(1e9, 0),
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Spec:   v1alpha1.ClusterSpec{ClusterID: "uid-west", KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: "https://west", CABundle: []byte("ca")}}},
			Status: st,
		}
	}
	tests := []struct {
		name    string
		in      *v1alpha1.Cluster
		want    v1alpha1.ClusterStatus
		relayed bool
	}{
		{"the peer's own", cluster(v1alpha1.ClusterTypeLocal), cluster(v1alpha1.ClusterTypeLocal).Status, false},
		{"another member, as the peer sees it", cluster(v1alpha1.ClusterTypePeer), v1alpha1.ClusterStatus{}, true},
	}
	transform := peerClusters(newPools())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.in.DeepCopy()
			want.ManagedFields, want.Status = nil, tt.want
			if tt.relayed {
				// What the peer's API server writes of its own copy (objectPool).
				want.UID, want.ResourceVersion, want.Generation, want.CreationTimestamp = "", "", 0, metav1.Time{}
			}
			out, err := transform(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, out); diff != "" {
				t.Errorf("cached Cluster (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPeersShareRelays: the reader kubeconfig and CA bundle every peer serves alike of a
// member are held once, however many peers' caches hold them; different bytes are not
// shared.
func TestPeersShareRelays(t *testing.T) {
	pools := newPools()
	pool := pools.bytes
	secrets, clusters := peerSecrets("uid-local", pools), peerClusters(pools)
	kubeconfig := bytes.Repeat([]byte("k"), 3000)
	ca := bytes.Repeat([]byte("c"), 1200)
	var got [][]byte
	for range 3 {
		s, err := secrets(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "west"}, Data: map[string][]byte{v1alpha1.KubeconfigKey: bytes.Clone(kubeconfig)}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s.(*corev1.Secret).Data[v1alpha1.KubeconfigKey])
		c, err := clusters(&v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{CABundle: bytes.Clone(ca)}}}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.(*v1alpha1.Cluster).Spec.KubernetesAPIEndpoints[0].CABundle)
	}
	for i := 2; i < len(got); i++ {
		if &got[i][0] != &got[i%2][0] || !bytes.Equal(got[i], got[i%2]) {
			t.Errorf("copy %d is not the pool's copy", i)
		}
	}
	other := bytes.Repeat([]byte("k"), 3001)
	if shared := pool.share(other); &shared[0] == &got[0][0] || !bytes.Equal(shared, other) {
		t.Error("different bytes were shared")
	}
	if shared := pool.share(got[0]); cap(shared) != len(shared) {
		t.Errorf("a shared copy has room to append in place: len %d, cap %d", len(shared), cap(shared))
	}
}

// TestPoolFrees: the pool holds its copies weakly: once no cache object holds them they
// are freed, and its sweep drops their entries.
func TestPoolFrees(t *testing.T) {
	pool := newBytePool()
	for i := range 3000 {
		pool.share(bytes.Repeat([]byte{byte(i), byte(i >> 8)}, internMin))
	}
	if n := swept(&pool.mu, pool.sweep, func() int { return len(pool.m) }); n > 10 {
		t.Errorf("the pool still holds %d entries of 3000 copies nothing holds", n)
	}
	kept := pool.share(bytes.Repeat([]byte("x"), internMin))
	runtime.GC()
	if again := pool.share(bytes.Repeat([]byte("x"), internMin)); &again[0] != &kept[0] {
		t.Error("a copy still held was not shared after a collection")
	}
	runtime.KeepAlive(kept)
}

// TestMapPoolShares: equal maps are one map, however they were built; maps that differ
// in a key or a value (another peer's, a hostile peer's) are not shared, and leave the
// shared one as it was; nil and empty maps are left as they are.
func TestMapPoolShares(t *testing.T) {
	id := func(m any) uintptr { return uintptr(reflect.ValueOf(m).UnsafePointer()) }
	meta := newStringMapPool()
	a := meta.share(map[string]string{"x": "1", "y": "2"})
	b := meta.share(map[string]string{"y": "2", "x": "1"})
	if id(a) != id(b) || !maps.Equal(a, map[string]string{"x": "1", "y": "2"}) {
		t.Errorf("equal maps are not one: %v %v", a, b)
	}
	for _, other := range []map[string]string{{"x": "1"}, {"x": "1", "y": "3"}, {"x": "1", "z": "2"}, {"x\x001": "", "y": "2"}} {
		if got := meta.share(other); id(got) == id(a) || !maps.Equal(got, other) {
			t.Errorf("%v was shared with %v", other, a)
		}
	}
	// What a peer serves never changes what another peer's cache holds: the pool writes
	// no map, and a peer's different map is its own.
	if !maps.Equal(a, map[string]string{"x": "1", "y": "2"}) {
		t.Errorf("the shared map changed to %v", a)
	}
	if got := meta.share(nil); got != nil {
		t.Errorf("nil became %v", got)
	}
	if got := meta.share(map[string]string{}); got == nil || len(got) != 0 {
		t.Errorf("an empty map became %v", got)
	}
	data := newBytesMapPool()
	d1 := data.share(map[string][]byte{"k": []byte("v")})
	d2 := data.share(map[string][]byte{"k": []byte("v")})
	d3 := data.share(map[string][]byte{"k": []byte("w")})
	if id(d1) != id(d2) || id(d1) == id(d3) {
		t.Error("Secret data maps are not shared by their bytes")
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(d1)
}

// TestMapPoolFrees: the map pool holds its maps weakly, like the byte pool.
func TestMapPoolFrees(t *testing.T) {
	pool := newStringMapPool()
	for i := range 3000 {
		pool.share(map[string]string{"i": strconv.Itoa(i)})
	}
	if n := swept(&pool.mu, pool.sweep, func() int { return len(pool.m) }); n > 10 {
		t.Errorf("the pool still holds %d entries of 3000 maps nothing holds", n)
	}
	kept := pool.share(map[string]string{"kept": "yes"})
	runtime.GC()
	again := pool.share(map[string]string{"kept": "yes"})
	if reflect.ValueOf(again).UnsafePointer() != reflect.ValueOf(kept).UnsafePointer() {
		t.Error("a map still held was not shared after a collection")
	}
	runtime.KeepAlive(kept)
}

// swept collects garbage, then sweeps a pool and returns its number of entries.
func swept(mu *sync.Mutex, sweep func(), entries func() int) int {
	runtime.GC()
	mu.Lock()
	defer mu.Unlock()
	sweep()
	return entries()
}

// TestObjectPoolShares: the Clusters and reader Secrets that peers serve alike of a member,
// each with the bookkeeping of its own API server, are one object in the caches, as are
// the stubs of the credentials they issued the member; a peer's own Cluster and the
// credential issued to this cluster are its own; an object that differs in anything a
// decision reads (a hostile peer's) is not shared and leaves the shared one as it was.
func TestObjectPoolShares(t *testing.T) {
	pools := newPools()
	const local = "uid-local"
	secrets, clusters := peerSecrets(local, pools), peerClusters(pools)
	meta := func(name, peer string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + peer + "-" + name), ResourceVersion: peer,
			CreationTimestamp: metav1.Unix(int64(len(peer)), 0), Annotations: map[string]string{"a": "v"}}
	}
	cluster := func(peer, server string, typ v1alpha1.ClusterType) any {
		c := &v1alpha1.Cluster{ObjectMeta: meta("south", peer), Status: v1alpha1.ClusterStatus{Type: typ, State: v1alpha1.ClusterStateReady},
			Spec: v1alpha1.ClusterSpec{ClusterID: "uid-south", KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: server}}}}
		c.Namespace = ""
		out, err := clusters(c)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	secret := func(peer, name, key, value string) any {
		out, err := secrets(&corev1.Secret{ObjectMeta: meta(name, peer), Data: map[string][]byte{key: []byte(value)}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	type pair struct {
		name   string
		a, b   func() any
		shared bool
	}
	issuedSouth := v1alpha1.IssuedReaderSecretName("uid-south")
	mine := v1alpha1.IssuedReaderSecretName(local)
	for _, tt := range []pair{
		{"a relayed Cluster", func() any { return cluster("east", "https://south", v1alpha1.ClusterTypePeer) },
			func() any { return cluster("west", "https://south", v1alpha1.ClusterTypePeer) }, true},
		{"a relayed Cluster that differs", func() any { return cluster("east", "https://south", v1alpha1.ClusterTypePeer) },
			func() any { return cluster("hostile", "https://hostile", v1alpha1.ClusterTypePeer) }, false},
		{"the peer's own Cluster", func() any { return cluster("east", "https://south", v1alpha1.ClusterTypeLocal) },
			func() any { return cluster("west", "https://south", v1alpha1.ClusterTypeLocal) }, false},
		{"a reader Secret", func() any { return secret("east", "south", v1alpha1.KubeconfigKey, "kc") },
			func() any { return secret("west", "south", v1alpha1.KubeconfigKey, "kc") }, true},
		{"a reader Secret that differs", func() any { return secret("east", "south", v1alpha1.KubeconfigKey, "kc") },
			func() any { return secret("hostile", "south", v1alpha1.KubeconfigKey, "other") }, false},
		{"a credential issued to another member", func() any { return secret("east", issuedSouth, v1alpha1.SealedKubeconfigKey, "e") },
			func() any { return secret("west", issuedSouth, v1alpha1.SealedKubeconfigKey, "w") }, true},
		{"the credential issued to this cluster", func() any { return secret("east", mine, v1alpha1.SealedKubeconfigKey, "s") },
			func() any { return secret("west", mine, v1alpha1.SealedKubeconfigKey, "s") }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.a()
			want := reflect.ValueOf(a).Elem().Interface() // a copy of the struct
			b := tt.b()
			if shared := a == b; shared != tt.shared {
				t.Errorf("shared: %v, want %v", shared, tt.shared)
			}
			if diff := cmp.Diff(want, reflect.ValueOf(a).Elem().Interface()); diff != "" {
				t.Errorf("the first peer's object changed (-before +after):\n%s", diff)
			}
			runtime.KeepAlive(a)
		})
	}
}

// TestObjectPoolFrees: the object pool holds its objects weakly, like the others.
func TestObjectPoolFrees(t *testing.T) {
	pool := newObjectPool[string](deepEqual[corev1.Secret])
	for i := range 3000 {
		pool.share(strconv.Itoa(i), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: strconv.Itoa(i)}})
	}
	if n := swept(&pool.mu, pool.sweep, func() int { return len(pool.m) }); n > 10 {
		t.Errorf("the pool still holds %d entries of 3000 objects nothing holds", n)
	}
	kept := pool.share("kept", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kept"}})
	runtime.GC()
	if again := pool.share("kept", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}); again != kept {
		t.Error("an object still held was not shared after a collection")
	}
	runtime.KeepAlive(kept)
}
