package bootstrap

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

func localCluster(eps ...v1alpha1.KubernetesAPIEndpoint) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: testName},
		Spec:       v1alpha1.ClusterSpec{ClusterID: testID, KubernetesAPIEndpoints: eps},
	}
}

var firstMint = []mintCall{{Namespace: testNS, ServiceAccount: v1alpha1.ReaderName, ExpirationSeconds: int64(testLifetime / time.Second)}}

// 1. The first reconcile creates the Cluster, the ServiceAccount and the Secret.
func TestReconcileCreates(t *testing.T) {
	secretRef := v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: testName, Namespace: testNS}}
	tests := []struct {
		name      string
		configure func(e *env, o *Options)
		objs      []client.Object
		// want* take the env for its CAs.
		wantSpec   func(e *env) v1alpha1.ClusterSpec
		wantSecret client.ObjectKey
		wantReader func(e *env) readerConfig
	}{
		{
			name: "endpoint, network and endpoint CA from the options (in cluster)",
			configure: func(e *env, o *Options) {
				o.Endpoint, o.NetworkName, o.EndpointCA = endpoint1, "corp", e.endpointCA
			},
			wantSpec: func(e *env) v1alpha1.ClusterSpec {
				return v1alpha1.ClusterSpec{ClusterID: testID, AuthInfo: secretRef, KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{
					{ClientNetwork: "corp", ServerAddress: endpoint1, CABundle: e.endpointCA},
				}}
			},
			wantReader: func(e *env) readerConfig {
				return readerConfig{Server: endpoint1, CA: string(e.endpointCA), Token: "token-1"}
			},
		},
		{
			name:      "endpoint without a CA: the local CA verifies it",
			configure: func(e *env, o *Options) { o.Endpoint = endpoint1 },
			wantSpec: func(e *env) v1alpha1.ClusterSpec {
				return v1alpha1.ClusterSpec{ClusterID: testID, AuthInfo: secretRef, KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{
					{ServerAddress: endpoint1},
				}}
			},
			wantReader: func(e *env) readerConfig {
				return readerConfig{Server: endpoint1, CA: string(e.localCA), Token: "token-1"}
			},
		},
		{
			name:      "out of cluster without an endpoint: the local server, not written to the CR",
			configure: func(e *env, o *Options) { o.LocalServer = localServer },
			wantSpec: func(e *env) v1alpha1.ClusterSpec {
				return v1alpha1.ClusterSpec{ClusterID: testID, AuthInfo: secretRef}
			},
			wantReader: func(e *env) readerConfig {
				return readerConfig{Server: localServer, CA: string(e.localCA), Token: "token-1"}
			},
		},
		{
			name:      "existing CR: its endpoint for the network wins over the local server; secretRef filled in",
			configure: func(e *env, o *Options) { o.NetworkName, o.LocalServer = "corp", localServer },
			objs: []client.Object{localCluster(
				v1alpha1.KubernetesAPIEndpoint{ServerAddress: "https://any.example.com"},
				v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "corp", ServerAddress: "alpha.corp:443"},
			)},
			wantSpec: func(e *env) v1alpha1.ClusterSpec {
				return v1alpha1.ClusterSpec{ClusterID: testID, AuthInfo: secretRef, KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{
					{ServerAddress: "https://any.example.com"},
					{ClientNetwork: "corp", ServerAddress: "alpha.corp:443"},
				}}
			},
			wantReader: func(e *env) readerConfig {
				return readerConfig{Server: "https://alpha.corp:443", CA: string(e.localCA), Token: "token-1"}
			},
		},
		{
			name:      "existing CR with its own secretRef: the Secret goes there",
			configure: func(e *env, o *Options) { o.Endpoint = endpoint1 },
			objs: []client.Object{&v1alpha1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Name: testName},
				Spec: v1alpha1.ClusterSpec{ClusterID: testID, AuthInfo: v1alpha1.AuthInfo{
					SecretRef: v1alpha1.NamespacedName{Name: "alpha-reader", Namespace: "elsewhere"},
				}},
			}},
			wantSpec: func(e *env) v1alpha1.ClusterSpec {
				return v1alpha1.ClusterSpec{ClusterID: testID,
					AuthInfo:               v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: "alpha-reader", Namespace: "elsewhere"}},
					KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: endpoint1}},
				}
			},
			wantSecret: client.ObjectKey{Namespace: "elsewhere", Name: "alpha-reader"},
			wantReader: func(e *env) readerConfig {
				return readerConfig{Server: endpoint1, CA: string(e.localCA), Token: "token-1"}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.configure, tc.objs...)
			res := e.mustReconcile()

			if diff := cmp.Diff(tc.wantSpec(e), e.cluster().Spec, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Cluster spec (-want +got):\n%s", diff)
			}
			sa := e.serviceAccount()
			if sa.UID == "" {
				t.Fatal("the ServiceAccount has no UID")
			}
			if got := sa.Labels["app.kubernetes.io/part-of"]; got != "kubectl-registry" {
				t.Errorf("ServiceAccount label app.kubernetes.io/part-of = %q", got)
			}

			key := tc.wantSecret
			if key.Name == "" {
				key = client.ObjectKey{Namespace: testNS, Name: testName}
			}
			s := e.secretAt(key)
			if s.Type != v1alpha1.SecretTypeClusterRegistry {
				t.Errorf("Secret type = %q, want %q", s.Type, v1alpha1.SecretTypeClusterRegistry)
			}
			if diff := cmp.Diff(tokenAnnotations(start, testLifetime, sa.UID), s.Annotations); diff != "" {
				t.Errorf("Secret annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReader(e), parseReader(t, s)); diff != "" {
				t.Errorf("reader kubeconfig (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(firstMint, e.minter.Calls()); diff != "" {
				t.Errorf("token requests (-want +got):\n%s", diff)
			}
			if !approx(res.RequeueAfter, testLifetime/2) {
				t.Errorf("RequeueAfter = %s, want about %s", res.RequeueAfter, testLifetime/2)
			}
			if len(e.events) != 1 || !strings.Contains(e.events[0], "ReaderTokenIssued") {
				t.Errorf("events = %q, want one ReaderTokenIssued", e.events)
			}
		})
	}
}

// resourceVersions returns the resourceVersions of the Cluster, ServiceAccount and Secret.
func (e *env) resourceVersions() []string {
	e.t.Helper()
	return []string{e.cluster().ResourceVersion, e.serviceAccount().ResourceVersion, e.secret().ResourceVersion}
}

// 2. Reconciling again before renew-after mints no token and writes nothing.
func TestReconcileSteadyState(t *testing.T) {
	for _, tc := range []struct {
		name      string
		configure func(e *env, o *Options)
	}{
		{"endpoint with network and CA", func(e *env, o *Options) { o.Endpoint, o.NetworkName, o.EndpointCA = endpoint1, "corp", e.endpointCA }},
		{"endpoint without CA", func(e *env, o *Options) { o.Endpoint = endpoint1 }},
		{"local server", func(e *env, o *Options) { o.LocalServer = localServer }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.configure)
			e.mustReconcile()
			e.takeWrites()
			rvs := e.resourceVersions()

			for _, at := range []time.Duration{0, time.Minute, testLifetime/2 - time.Second} {
				e.clock.Set(start.Add(at))
				res := e.mustReconcile()
				if w := e.takeWrites(); len(w) != 0 {
					t.Errorf("at +%s: writes %q, want none", at, w)
				}
				if diff := cmp.Diff(rvs, e.resourceVersions()); diff != "" {
					t.Errorf("at +%s: resourceVersions changed (-before +after):\n%s", at, diff)
				}
				if want := testLifetime/2 - at; !approx(res.RequeueAfter, want) {
					t.Errorf("at +%s: RequeueAfter = %s, want about %s", at, res.RequeueAfter, want)
				}
			}
			if n := len(e.minter.Calls()); n != 1 {
				t.Errorf("%d token requests, want 1", n)
			}
		})
	}
}

// 3. Once renew-after has passed, a new token is written into the same Secret.
func TestReconcileRenews(t *testing.T) {
	for _, after := range []time.Duration{testLifetime / 2, testLifetime/2 + time.Minute, 2 * testLifetime} {
		t.Run("at +"+after.String(), func(t *testing.T) {
			e := newEnv(t, func(e *env, o *Options) { o.Endpoint = endpoint1 })
			e.mustReconcile()
			before := e.secret()
			e.takeWrites()

			e.clock.Set(start.Add(after))
			res := e.mustReconcile()

			s := e.secret()
			if s.UID != before.UID {
				t.Errorf("Secret UID %s -> %s, want it updated in place", before.UID, s.UID)
			}
			if diff := cmp.Diff([]string{"update *v1.Secret " + testNS + "/" + testName}, e.takeWrites()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tokenAnnotations(start.Add(after), testLifetime, e.serviceAccount().UID), s.Annotations); diff != "" {
				t.Errorf("Secret annotations (-want +got):\n%s", diff)
			}
			want := readerConfig{Server: endpoint1, CA: string(e.localCA), Token: "token-2"}
			if diff := cmp.Diff(want, parseReader(t, s)); diff != "" {
				t.Errorf("reader kubeconfig (-want +got):\n%s", diff)
			}
			if !approx(res.RequeueAfter, testLifetime/2) {
				t.Errorf("RequeueAfter = %s, want about %s", res.RequeueAfter, testLifetime/2)
			}
			if n := len(e.minter.Calls()); n != 2 {
				t.Errorf("%d token requests, want 2", n)
			}
		})
	}
}

// The renewal time follows the lifetime the API server granted, not the one asked.
func TestReconcileGrantedLifetime(t *testing.T) {
	tests := []struct {
		name         string
		adjust       func(m *fakeMinter)
		wantLifetime time.Duration
	}{
		{"granted as asked", func(*fakeMinter) {}, testLifetime},
		{"capped by the API server", func(m *fakeMinter) { m.granted = 20 * time.Minute }, 20 * time.Minute},
		{"longer than asked", func(m *fakeMinter) { m.granted = 3 * testLifetime }, 3 * testLifetime},
		{"no expiration returned: the asked lifetime", func(m *fakeMinter) { m.noExpiry = true }, testLifetime},
		{"expiration in the past: the asked lifetime", func(m *fakeMinter) { m.granted = -time.Minute }, testLifetime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(e *env, o *Options) { o.Endpoint = endpoint1 })
			tc.adjust(e.minter)
			res := e.mustReconcile()
			if diff := cmp.Diff(tokenAnnotations(start, tc.wantLifetime, e.serviceAccount().UID), e.secret().Annotations); diff != "" {
				t.Errorf("Secret annotations (-want +got):\n%s", diff)
			}
			if !approx(res.RequeueAfter, tc.wantLifetime/2) {
				t.Errorf("RequeueAfter = %s, want about %s", res.RequeueAfter, tc.wantLifetime/2)
			}
		})
	}
}

// 4. A recreated ServiceAccount (new UID) revokes the old token: a new one is issued.
func TestReconcileServiceAccountRecreated(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recreate func(e *env)
	}{
		{"deleted: the reconciler recreates it", func(e *env) {
			if err := e.c.Delete(e.ctx, e.serviceAccount()); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted and recreated by someone else", func(e *env) {
			if err := e.c.Delete(e.ctx, e.serviceAccount()); err != nil {
				t.Fatal(err)
			}
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: v1alpha1.ReaderName, UID: "someone-elses-uid"}}
			if err := e.c.Create(e.ctx, sa); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(e *env, o *Options) { o.Endpoint = endpoint1 })
			e.mustReconcile()
			oldSA, oldSecret := e.serviceAccount(), e.secret()

			e.clock.Advance(time.Minute) // well before renew-after
			tc.recreate(e)
			e.mustReconcile()

			sa, s := e.serviceAccount(), e.secret()
			if sa.UID == oldSA.UID {
				t.Fatalf("ServiceAccount UID unchanged (%s)", sa.UID)
			}
			if s.UID != oldSecret.UID {
				t.Errorf("Secret UID %s -> %s, want it updated in place", oldSecret.UID, s.UID)
			}
			if diff := cmp.Diff(tokenAnnotations(e.clock.Now(), testLifetime, sa.UID), s.Annotations); diff != "" {
				t.Errorf("Secret annotations (-want +got):\n%s", diff)
			}
			if got := parseReader(t, s).Token; got != "token-2" {
				t.Errorf("token = %q, want token-2", got)
			}
			// And it is stable again.
			e.takeWrites()
			e.mustReconcile()
			if w := e.takeWrites(); len(w) != 0 {
				t.Errorf("writes after the renewal: %q", w)
			}
		})
	}
}

// 5. A changed endpoint gives a new kubeconfig with the new server.
func TestReconcileEndpointChanges(t *testing.T) {
	setEndpoints := func(eps ...v1alpha1.KubernetesAPIEndpoint) func(e *env) {
		return func(e *env) {
			c := e.cluster()
			patch := client.MergeFrom(c.DeepCopy())
			c.Spec.KubernetesAPIEndpoints = eps
			if err := e.c.Patch(e.ctx, c, patch); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name      string
		configure func(e *env, o *Options)
		objs      []client.Object
		change    func(e *env)
		// wantCR are the endpoints expected in the CR after the change.
		wantCR     func(e *env) []v1alpha1.KubernetesAPIEndpoint
		wantReader func(e *env) readerConfig // nil: unchanged, no new token
	}{
		{
			name:      "Options.Endpoint changes",
			configure: func(e *env, o *Options) { o.Endpoint, o.NetworkName = endpoint1, "corp" },
			change:    func(e *env) { e.r.Options.Endpoint = endpoint2 },
			wantCR: func(e *env) []v1alpha1.KubernetesAPIEndpoint {
				return []v1alpha1.KubernetesAPIEndpoint{{ClientNetwork: "corp", ServerAddress: endpoint2}}
			},
			wantReader: func(e *env) readerConfig {
				return readerConfig{Server: endpoint2, CA: string(e.localCA), Token: "token-2"}
			},
		},
		{
			name:      "Options.EndpointCA changes",
			configure: func(e *env, o *Options) { o.Endpoint, o.NetworkName = endpoint1, "corp" },
			change:    func(e *env) { e.r.Options.EndpointCA = e.endpointCA },
			wantCR: func(e *env) []v1alpha1.KubernetesAPIEndpoint {
				return []v1alpha1.KubernetesAPIEndpoint{{ClientNetwork: "corp", ServerAddress: endpoint1, CABundle: e.endpointCA}}
			},
			wantReader: func(e *env) readerConfig {
				return readerConfig{Server: endpoint1, CA: string(e.endpointCA), Token: "token-2"}
			},
		},
		{
			name:      "the CR's endpoint for the network is edited",
			configure: func(e *env, o *Options) { o.NetworkName = "corp" },
			objs: []client.Object{localCluster(
				v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "corp", ServerAddress: endpoint1},
				v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "other", ServerAddress: "https://other.example.com"},
			)},
			change: setEndpoints(
				v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "corp", ServerAddress: "alpha-new.example.com:6443"},
				v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "other", ServerAddress: "https://other.example.com"},
			),
			wantCR: func(e *env) []v1alpha1.KubernetesAPIEndpoint {
				return []v1alpha1.KubernetesAPIEndpoint{
					{ClientNetwork: "corp", ServerAddress: "alpha-new.example.com:6443"},
					{ClientNetwork: "other", ServerAddress: "https://other.example.com"},
				}
			},
			wantReader: func(e *env) readerConfig {
				return readerConfig{Server: endpoint2, CA: string(e.localCA), Token: "token-2"}
			},
		},
		{
			name:      "an endpoint is added to the CR: it replaces the local server",
			configure: func(e *env, o *Options) { o.LocalServer = localServer },
			change:    setEndpoints(v1alpha1.KubernetesAPIEndpoint{ServerAddress: endpoint2, CABundle: []byte(nil)}),
			wantCR: func(e *env) []v1alpha1.KubernetesAPIEndpoint {
				return []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: endpoint2}}
			},
			wantReader: func(e *env) readerConfig {
				return readerConfig{Server: endpoint2, CA: string(e.localCA), Token: "token-2"}
			},
		},
		{
			name:      "the CR's endpoint of another network is edited: nothing to do",
			configure: func(e *env, o *Options) { o.NetworkName = "corp" },
			objs: []client.Object{localCluster(
				v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "corp", ServerAddress: endpoint1},
				v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "other", ServerAddress: "https://other.example.com"},
			)},
			change: setEndpoints(
				v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "corp", ServerAddress: endpoint1},
				v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "other", ServerAddress: "https://other-new.example.com"},
			),
			wantCR: func(e *env) []v1alpha1.KubernetesAPIEndpoint {
				return []v1alpha1.KubernetesAPIEndpoint{
					{ClientNetwork: "corp", ServerAddress: endpoint1},
					{ClientNetwork: "other", ServerAddress: "https://other-new.example.com"},
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.configure, tc.objs...)
			e.mustReconcile()
			before := e.secret()

			e.clock.Advance(time.Minute) // well before renew-after
			tc.change(e)
			e.takeWrites()
			e.mustReconcile()

			if diff := cmp.Diff(tc.wantCR(e), e.cluster().Spec.KubernetesAPIEndpoints, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("CR endpoints (-want +got):\n%s", diff)
			}
			s := e.secret()
			if s.UID != before.UID {
				t.Errorf("Secret UID %s -> %s, want it updated in place", before.UID, s.UID)
			}
			if tc.wantReader == nil {
				if s.ResourceVersion != before.ResourceVersion {
					t.Errorf("the Secret was written (resourceVersion %s -> %s)", before.ResourceVersion, s.ResourceVersion)
				}
				if n := len(e.minter.Calls()); n != 1 {
					t.Errorf("%d token requests, want 1", n)
				}
				return
			}
			if diff := cmp.Diff(tc.wantReader(e), parseReader(t, s)); diff != "" {
				t.Errorf("reader kubeconfig (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tokenAnnotations(e.clock.Now(), testLifetime, e.serviceAccount().UID), s.Annotations); diff != "" {
				t.Errorf("Secret annotations (-want +got):\n%s", diff)
			}
			// Stable afterwards.
			e.takeWrites()
			e.mustReconcile()
			if w := e.takeWrites(); len(w) != 0 {
				t.Errorf("writes after the change was applied: %q", w)
			}
		})
	}
}

// 6. No endpoint peers can reach, and no local server (in a pod): an error that says
// what to do, and no Secret.
func TestReconcileNoEndpoint(t *testing.T) {
	tests := []struct {
		name      string
		configure func(e *env, o *Options)
		objs      []client.Object
	}{
		{name: "no CR yet"},
		{name: "CR without endpoints", objs: []client.Object{localCluster()}},
		{
			name:      "CR with an endpoint for another network only",
			configure: func(e *env, o *Options) { o.NetworkName = "corp" },
			objs:      []client.Object{localCluster(v1alpha1.KubernetesAPIEndpoint{ClientNetwork: "other", ServerAddress: endpoint1})},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.configure, tc.objs...)
			_, err := e.reconcile()
			if err == nil {
				t.Fatal("Reconcile succeeded, want an error")
			}
			for _, want := range []string{"--api-server-endpoint", "spec.kubernetesApiEndpoints", testName} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if names := e.secretNames(); len(names) != 0 {
				t.Errorf("Secrets written: %q", names)
			}
			if calls := e.minter.Calls(); len(calls) != 0 {
				t.Errorf("token requests: %v", calls)
			}
			if len(e.events) != 1 || !strings.Contains(e.events[0], "Warning ReaderSecretFailed") {
				t.Errorf("events = %q, want one Warning ReaderSecretFailed", e.events)
			}
		})
	}
}

// When the endpoint goes away, the Secret already published is left as it is.
func TestReconcileEndpointRemovedKeepsSecret(t *testing.T) {
	e := newEnv(t, nil, localCluster(v1alpha1.KubernetesAPIEndpoint{ServerAddress: endpoint1}))
	e.mustReconcile()
	before := e.secret()

	c := e.cluster()
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.KubernetesAPIEndpoints = nil
	if err := e.c.Patch(e.ctx, c, patch); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(start.Add(testLifetime)) // even when due
	if _, err := e.reconcile(); err == nil || !strings.Contains(err.Error(), "--api-server-endpoint") {
		t.Fatalf("Reconcile error = %v, want one mentioning --api-server-endpoint", err)
	}
	if diff := cmp.Diff(before, e.secret()); diff != "" {
		t.Errorf("Secret changed (-before +after):\n%s", diff)
	}
}

// 7. A Cluster with our name but another cluster's ID is not ours: an error naming both
// IDs, and nothing is written.
func TestReconcileClusterIDConflict(t *testing.T) {
	const otherID = "0b7e2a55-0000-4000-8000-0000000be7a0"
	theirs := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: testName},
		Spec: v1alpha1.ClusterSpec{
			ClusterID:              otherID,
			AuthInfo:               v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: testName, Namespace: testNS}},
			KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: "https://theirs.example.com"}},
		},
	}
	e := newEnv(t, func(e *env, o *Options) { o.Endpoint, o.LocalServer = endpoint1, localServer }, theirs)
	before := e.cluster()

	_, err := e.reconcile()
	if err == nil {
		t.Fatal("Reconcile succeeded, want an error")
	}
	for _, want := range []string{otherID, string(testID), testName, "--cluster-name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if diff := cmp.Diff(before, e.cluster()); diff != "" {
		t.Errorf("the Cluster was modified (-before +after):\n%s", diff)
	}
	if w := e.takeWrites(); len(w) != 0 {
		t.Errorf("writes: %q", w)
	}
	if calls := e.minter.Calls(); len(calls) != 0 {
		t.Errorf("token requests: %v", calls)
	}
}

// 8 and 9. A Secret that is not current is re-issued: in place when its type is right,
// replaced when its type is wrong; ownership marks of a peer's copy are removed.
func TestReconcileReissuesWhenNotCurrent(t *testing.T) {
	tests := []struct {
		name string
		// mutate turns the current Secret into the pre-existing one.
		mutate      func(e *env, s *corev1.Secret)
		wantReplace bool
	}{
		{
			name: "Opaque type (wrong), otherwise current",
			mutate: func(e *env, s *corev1.Secret) {
				s.Type = corev1.SecretTypeOpaque
			},
			wantReplace: true,
		},
		{
			name: "Opaque type with junk",
			mutate: func(e *env, s *corev1.Secret) {
				s.Type = corev1.SecretTypeOpaque
				s.Annotations = nil
				s.Data = map[string][]byte{"junk": []byte("junk")}
			},
			wantReplace: true,
		},
		{
			name: "a peer's copy with our name (ownership annotation and label)",
			mutate: func(e *env, s *corev1.Secret) {
				data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: testName, Server: endpoint1, CAData: e.localCA, Token: "peer-token"})
				if err != nil {
					e.t.Fatal(err)
				}
				s.Data[v1alpha1.KubeconfigKey] = data
				s.Annotations[v1alpha1.OwnershipAnnotation] = "peer-cluster-id"
				s.Labels = map[string]string{v1alpha1.OwnershipLabel: "peer-cluster-id", "team": "blue"}
			},
		},
		{
			name: "kubeconfig does not parse",
			mutate: func(e *env, s *corev1.Secret) {
				s.Data[v1alpha1.KubeconfigKey] = []byte("not a kubeconfig")
			},
		},
		{
			name: "no kubeconfig key",
			mutate: func(e *env, s *corev1.Secret) {
				s.Data = map[string][]byte{"other": []byte("x")}
			},
		},
		{
			name: "renew-after missing",
			mutate: func(e *env, s *corev1.Secret) {
				delete(s.Annotations, v1alpha1.TokenRenewAfterAnnotation)
			},
		},
		{
			name: "renew-after not a time",
			mutate: func(e *env, s *corev1.Secret) {
				s.Annotations[v1alpha1.TokenRenewAfterAnnotation] = "soon"
			},
		},
		{
			name: "issued for another ServiceAccount UID",
			mutate: func(e *env, s *corev1.Secret) {
				s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] = "previous-sa-uid"
			},
		},
		{
			name: "kubeconfig for another CA",
			mutate: func(e *env, s *corev1.Secret) {
				data, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: testName, Server: endpoint1, CAData: e.endpointCA, Token: "old-token"})
				if err != nil {
					e.t.Fatal(err)
				}
				s.Data[v1alpha1.KubeconfigKey] = data
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Issue a current Secret in a scratch env, reshape it, and plant it in a
			// fresh one that already has the same ServiceAccount.
			scratch := newEnv(t, func(e *env, o *Options) { o.Endpoint = endpoint1 })
			scratch.mustReconcile()
			sa := scratch.serviceAccount()
			s := scratch.secret()
			s.ResourceVersion = ""
			s.UID = "planted-uid"
			sa.ResourceVersion = ""

			e := newEnv(t, func(e *env, o *Options) { o.Endpoint = endpoint1 }, sa)
			e.localCA = scratch.localCA
			e.endpointCA = scratch.endpointCA
			e.r.Options.LocalCA = scratch.localCA
			tc.mutate(e, s)
			if err := e.c.Create(e.ctx, s); err != nil {
				t.Fatal(err)
			}
			e.takeWrites()

			res := e.mustReconcile()

			got := e.secret()
			if got.Type != v1alpha1.SecretTypeClusterRegistry {
				t.Errorf("Secret type = %q, want %q", got.Type, v1alpha1.SecretTypeClusterRegistry)
			}
			if replaced := got.UID != "planted-uid"; replaced != tc.wantReplace {
				t.Errorf("Secret replaced = %v (UID %s), want %v", replaced, got.UID, tc.wantReplace)
			}
			want := readerConfig{Server: endpoint1, CA: string(e.localCA), Token: "token-1"}
			if diff := cmp.Diff(want, parseReader(t, got)); diff != "" {
				t.Errorf("reader kubeconfig (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tokenAnnotations(start, testLifetime, sa.UID), got.Annotations); diff != "" {
				t.Errorf("Secret annotations (-want +got):\n%s", diff)
			}
			if _, ok := got.Labels[v1alpha1.OwnershipLabel]; ok {
				t.Errorf("ownership label kept: %v", got.Labels)
			}
			if got.Labels["app.kubernetes.io/part-of"] != "kubectl-registry" {
				t.Errorf("labels = %v, want app.kubernetes.io/part-of=kubectl-registry", got.Labels)
			}
			if !tc.wantReplace && s.Labels["team"] != "" && got.Labels["team"] != s.Labels["team"] {
				t.Errorf("unrelated label dropped: %v", got.Labels)
			}
			if _, ok := got.Data["junk"]; ok {
				t.Errorf("old data kept: %v", got.Data)
			}
			if !approx(res.RequeueAfter, testLifetime/2) {
				t.Errorf("RequeueAfter = %s, want about %s", res.RequeueAfter, testLifetime/2)
			}
			if diff := cmp.Diff(firstMint, e.minter.Calls()); diff != "" {
				t.Errorf("token requests (-want +got):\n%s", diff)
			}
			// Current now: the next reconcile writes nothing.
			e.takeWrites()
			e.mustReconcile()
			if w := e.takeWrites(); len(w) != 0 {
				t.Errorf("writes after re-issuing: %q", w)
			}
		})
	}
}

// A reconcile that runs before the cache has seen the ServiceAccount (Get says not
// found, Create says it already exists) must not re-issue the token: the UID it would
// record is unknown.
func TestReconcileServiceAccountNotCachedYet(t *testing.T) {
	e := newEnv(t, func(e *env, o *Options) { o.Endpoint = endpoint1 })
	e.mustReconcile()
	before := e.secret()
	e.takeWrites()

	e.getHook = func(key client.ObjectKey, obj client.Object) error {
		if _, ok := obj.(*corev1.ServiceAccount); ok {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, key.Name)
		}
		return nil
	}
	e.clock.Advance(time.Minute)
	res, err := e.reconcile()
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Second {
		t.Errorf("RequeueAfter = %s, want a short retry", res.RequeueAfter)
	}
	if diff := cmp.Diff(before, e.secret()); diff != "" {
		t.Errorf("Secret changed (-before +after):\n%s", diff)
	}
	if n := len(e.minter.Calls()); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}

	e.getHook = nil
	e.takeWrites()
	e.mustReconcile()
	if w := e.takeWrites(); len(w) != 0 {
		t.Errorf("writes once the cache caught up: %q", w)
	}
}

// Errors on the way never carry the token, and leave the published Secret alone.
func TestReconcileErrorsDoNotLeakToken(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		arrange func(e *env)
		want    string
	}{
		{
			name: "TokenRequest fails",
			arrange: func(e *env) {
				e.minter.err = apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, v1alpha1.ReaderName, boom)
			},
			want: "requesting a reader token",
		},
		{
			name:    "the token cannot be rendered",
			arrange: func(e *env) { e.minter.token = func(n int) string { return "bad token with spaces" } },
			want:    "rendering the reader kubeconfig",
		},
		{
			name: "updating the Secret fails",
			arrange: func(e *env) {
				e.writeHook = func(verb string, obj client.Object) error {
					if _, ok := obj.(*corev1.Secret); ok {
						return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, obj.GetName(), boom)
					}
					return nil
				}
			},
			want: "updating the reader Secret",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(e *env, o *Options) { o.Endpoint = endpoint1 })
			e.mustReconcile()
			before := e.secret()

			tc.arrange(e)
			e.clock.Set(start.Add(testLifetime / 2)) // due
			_, err := e.reconcile()                  // checks every issued token against err and events
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reconcile error = %v, want one containing %q", err, tc.want)
			}
			for _, tok := range e.minter.Issued() {
				if strings.Contains(err.Error(), tok) {
					t.Errorf("error %q contains the token", err)
				}
			}
			if strings.Contains(err.Error(), "token-1") {
				t.Errorf("error %q contains the published token", err)
			}
			if diff := cmp.Diff(before, e.secret()); diff != "" {
				t.Errorf("Secret changed (-before +after):\n%s", diff)
			}
		})
	}
}

// A reconcile that runs before the cache has seen the Secret (Get says not found,
// Create says it already exists) leaves the Secret alone and looks again shortly.
func TestReconcileSecretNotCachedYet(t *testing.T) {
	e := newEnv(t, func(e *env, o *Options) { o.Endpoint = endpoint1 })
	e.mustReconcile()
	before := e.secret()

	e.getHook = func(key client.ObjectKey, obj client.Object) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
		}
		return nil
	}
	e.clock.Advance(time.Minute)
	res, err := e.reconcile()
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if res.RequeueAfter != time.Second {
		t.Errorf("RequeueAfter = %s, want 1s", res.RequeueAfter)
	}
	e.getHook = nil
	if diff := cmp.Diff(before, e.secret()); diff != "" {
		t.Errorf("Secret changed (-before +after):\n%s", diff)
	}
}
