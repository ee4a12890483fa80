package clusters_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/clusters"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/issue"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
)

const (
	ns        = v1alpha1.DefaultNamespace
	localID   = types.UID("11111111-aaaa-4000-8000-000000000001")
	peerID    = types.UID("22222222-bbbb-4000-8000-000000000002")
	heartbeat = time.Minute
	metaEvery = 3 * time.Minute
	version   = "v1.36.3"
)

// t0 is the reconcilers' clock in these tests.
var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func cluster(name string, id types.UID, secret string) *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Spec.ClusterID = id
	c.Spec.AuthInfo.SecretRef.Name = secret
	c.Spec.AuthInfo.SecretRef.Namespace = ns
	return c
}

func readerSecret(name string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: typ, Data: data}
}

func node(name, kubelet string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.NodeInfo.KubeletVersion = kubelet
	return n
}

// fixture is a Reconciler over a fake client holding objs.
type fixture struct {
	r      *clusters.Reconciler
	client client.Client
	peers  *peers.Manager
	events *record.FakeRecorder
	now    *time.Time
}

func newFixture(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *fixture {
	t.Helper()
	s := newScheme(t)
	cl := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.Cluster{}).WithInterceptorFuncs(funcs).Build()
	pm, err := peers.NewManager(peers.Options{Scheme: s, Namespace: ns, LocalID: localID})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{client: cl, peers: pm, events: record.NewFakeRecorder(16)}
	now := t0
	f.now = &now
	f.r = &clusters.Reconciler{
		Client:          cl,
		Identity:        issue.Identity{ID: localID, Name: "local"},
		Peers:           pm,
		Namespace:       ns,
		ServerVersion:   func(context.Context) (string, error) { return version, nil },
		Recorder:        f.events,
		HeartbeatPeriod: heartbeat,
		MetadataPeriod:  metaEvery,
		Now:             func() time.Time { return *f.now },
	}
	return f
}

// startPeers runs the peer manager until the test ends, and returns once it takes
// connections (before that, Ensure answers "the controller is starting").
func (f *fixture) startPeers(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(logf.IntoContext(context.Background(), logr.Discard()))
	done := make(chan error, 1)
	go func() { done <- f.peers.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("peers.Manager.Start: %v", err)
		}
	})
	probe := cluster("probe", "probe-id", "probe")
	secret := readerSecret("probe", v1alpha1.SecretTypeClusterRegistry, map[string][]byte{v1alpha1.KubeconfigKey: []byte("not a kubeconfig")})
	deadline := time.Now().Add(10 * time.Second)
	for f.peers.Ensure(probe, secret, true).State != v1alpha1.ClusterStateInvalidAuthInfo {
		if time.Now().After(deadline) {
			t.Fatal("the peer manager did not start within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.peers.Remove(probe.Name)
}

func (f *fixture) reconcile(t *testing.T, name string) (reconcile.Result, error) {
	t.Helper()
	ctx := logf.IntoContext(context.Background(), logr.Discard())
	return f.r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
}

func (f *fixture) get(t *testing.T, name string) *v1alpha1.Cluster {
	t.Helper()
	var c v1alpha1.Cluster
	if err := f.client.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// drainEvents returns the events recorded so far.
func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// cond is what a test checks of a condition: its status and reason.
type cond struct {
	Status corev1.ConditionStatus
	Reason string
}

func condsOf(s v1alpha1.ClusterStatus) map[v1alpha1.ClusterConditionType]cond {
	out := map[v1alpha1.ClusterConditionType]cond{}
	for _, c := range s.Conditions {
		out[c.Type] = cond{c.Status, c.Reason}
	}
	return out
}

func condMessage(s v1alpha1.ClusterStatus, t v1alpha1.ClusterConditionType) string {
	c, _ := conditions.Get(s.Conditions, t)
	return c.Message
}

const (
	condLocal    = v1alpha1.ClusterConditionLocalCluster
	condConflict = v1alpha1.ClusterConditionLocalConflict
	condMeta     = v1alpha1.ClusterConditionMetadataSet
	condReady    = v1alpha1.ClusterConditionReady
	condSynced   = v1alpha1.ClusterConditionClustersSynced
)

var (
	isTrue    = corev1.ConditionTrue
	isFalse   = corev1.ConditionFalse
	isUnknown = corev1.ConditionUnknown
)

// TestReconcileStatus: what the status of one Cluster says, for the local cluster and for
// a peer, from the Cluster CRs, the reader Secret, the nodes and the peer connection.
func TestReconcileStatus(t *testing.T) {
	goodKubeconfig := map[string][]byte{v1alpha1.KubeconfigKey: []byte("apiVersion: v1\nkind: Config\n")}
	withConflict := v1alpha1.ClusterStatus{Conditions: []v1alpha1.ClusterCondition{
		conditions.New(condConflict, true, v1alpha1.ReasonLocalIDConflict, "left over from when this was local"),
	}}
	disabled := cluster("peer", peerID, "peer")
	disabled.Annotations = map[string]string{v1alpha1.ClusterDisabledAnnotation: "true"}
	noNamespace := cluster("peer", peerID, "peer")
	noNamespace.Spec.AuthInfo.SecretRef.Namespace = ""
	elsewhere := cluster("peer", peerID, "peer")
	elsewhere.Spec.AuthInfo.SecretRef.Namespace = "default"
	secretErr := errors.New("etcd is on fire")

	tests := []struct {
		name string
		// objs are in the fake client; reconciled is the Cluster reconciled.
		objs       []client.Object
		reconciled string
		// prior is the reconciled Cluster's status before.
		prior v1alpha1.ClusterStatus
		// startPeers runs the peer manager (else it is "starting").
		startPeers bool
		// versionErr makes the API server version fail.
		versionErr error
		// secretGetErr makes reading any Secret fail.
		secretGetErr error
		// reverseLists lists Clusters in reverse name order (the fake client sorts).
		reverseLists bool

		wantType     v1alpha1.ClusterType
		wantState    v1alpha1.ClusterState
		wantMessage  string
		wantConds    map[v1alpha1.ClusterConditionType]cond
		wantCondMsgs map[v1alpha1.ClusterConditionType]string
		wantMeta     v1alpha1.ClusterMetadata
		wantRequeue  time.Duration
		wantEvents   []string
	}{
		{
			name:       "the local cluster, alone",
			objs:       []client.Object{cluster("local", localID, "local"), node("n1", "v1.36.1"), node("n2", "v1.36.2"), node("n3", "v1.36.1")},
			reconciled: "local",
			wantType:   v1alpha1.ClusterTypeLocal,
			wantState:  v1alpha1.ClusterStateReady,
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:    {isTrue, v1alpha1.ReasonLocalClusterFound},
				condConflict: {isFalse, v1alpha1.ReasonNoConflict},
				condMeta:     {isTrue, v1alpha1.ReasonMetadataCollected},
				condReady:    {isTrue, v1alpha1.ReasonClusterReachable},
				condSynced:   {isTrue, v1alpha1.ReasonClustersInSync},
			},
			wantMeta:    v1alpha1.ClusterMetadata{Version: version, KubeletVersions: []string{"v1.36.1", "v1.36.2"}},
			wantRequeue: metaEvery,
			wantEvents:  []string{"Normal StateReady "},
		},
		{
			name:       "the local cluster with peers: still local, by ID not by name",
			objs:       []client.Object{cluster("zz-local", localID, "zz-local"), cluster("peer", peerID, "peer")},
			reconciled: "zz-local",
			wantType:   v1alpha1.ClusterTypeLocal,
			wantState:  v1alpha1.ClusterStateReady,
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:    {isTrue, v1alpha1.ReasonLocalClusterFound},
				condConflict: {isFalse, v1alpha1.ReasonNoConflict},
				condMeta:     {isTrue, v1alpha1.ReasonMetadataCollected},
				condReady:    {isTrue, v1alpha1.ReasonClusterReachable},
				condSynced:   {isTrue, v1alpha1.ReasonClustersInSync},
			},
			wantMeta:    v1alpha1.ClusterMetadata{Version: version},
			wantRequeue: metaEvery,
			wantEvents:  []string{"Normal StateReady "},
		},
		{
			name:         "two Clusters claim the local ID: a conflict naming both, Failed",
			objs:         []client.Object{cluster("local", localID, "local"), cluster("copy", localID, "copy"), cluster("peer", peerID, "peer")},
			reconciled:   "local",
			reverseLists: true,
			wantType:     v1alpha1.ClusterTypeLocal,
			wantState:    v1alpha1.ClusterStateFailed,
			wantMessage:  "Clusters copy, local all claim the local cluster ID " + string(localID) + "; delete all but one",
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:    {isTrue, v1alpha1.ReasonLocalClusterFound},
				condConflict: {isTrue, v1alpha1.ReasonLocalIDConflict},
				condMeta:     {isTrue, v1alpha1.ReasonMetadataCollected},
				condReady:    {isTrue, v1alpha1.ReasonClusterReachable},
				condSynced:   {isTrue, v1alpha1.ReasonClustersInSync},
			},
			wantCondMsgs: map[v1alpha1.ClusterConditionType]string{
				condConflict: "Clusters copy, local all claim the local cluster ID " + string(localID) + "; delete all but one",
			},
			wantMeta:    v1alpha1.ClusterMetadata{Version: version},
			wantRequeue: metaEvery,
			wantEvents:  []string{"Warning StateFailed Clusters copy, local all claim the local cluster ID " + string(localID) + "; delete all but one"},
		},
		{
			name:       "the metadata cannot be read: ClusterMetadataSet False, still Ready",
			objs:       []client.Object{cluster("local", localID, "local")},
			reconciled: "local",
			versionErr: errors.New("the server is gone"),
			wantType:   v1alpha1.ClusterTypeLocal,
			wantState:  v1alpha1.ClusterStateReady,
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:    {isTrue, v1alpha1.ReasonLocalClusterFound},
				condConflict: {isFalse, v1alpha1.ReasonNoConflict},
				condMeta:     {isFalse, v1alpha1.ReasonMetadataFailed},
				condReady:    {isTrue, v1alpha1.ReasonClusterReachable},
				condSynced:   {isTrue, v1alpha1.ReasonClustersInSync},
			},
			wantCondMsgs: map[v1alpha1.ClusterConditionType]string{condMeta: "reading the API server version: the server is gone"},
			wantRequeue:  metaEvery,
			wantEvents:   []string{"Normal StateReady "},
		},
		{
			name:        "a disabled peer: Disabled, and no LocalConflict left over",
			objs:        []client.Object{cluster("local", localID, "local"), disabled, readerSecret("peer", v1alpha1.SecretTypeClusterRegistry, goodKubeconfig)},
			reconciled:  "peer",
			prior:       withConflict,
			wantType:    v1alpha1.ClusterTypePeer,
			wantState:   v1alpha1.ClusterStateDisabled,
			wantMessage: "disabled by the annotation " + v1alpha1.ClusterDisabledAnnotation,
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:  {isFalse, v1alpha1.ReasonPeerCluster},
				condReady:  {isFalse, v1alpha1.ReasonClusterDisabled},
				condSynced: {isFalse, v1alpha1.ReasonClusterNotConnected},
			},
			wantRequeue: heartbeat,
			wantEvents:  []string{"Warning StateDisabled disabled by the annotation " + v1alpha1.ClusterDisabledAnnotation},
		},
		{
			name:        "a peer without a Secret reference: MissingAuthInfo",
			objs:        []client.Object{cluster("local", localID, "local"), cluster("peer", peerID, "")},
			reconciled:  "peer",
			wantType:    v1alpha1.ClusterTypePeer,
			wantState:   v1alpha1.ClusterStateMissingAuthInfo,
			wantMessage: "spec.authInfo.secretRef.name is not set",
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:  {isFalse, v1alpha1.ReasonPeerCluster},
				condReady:  {isFalse, v1alpha1.ReasonMissingAuthInfo},
				condSynced: {isFalse, v1alpha1.ReasonClusterNotConnected},
			},
			wantRequeue: heartbeat,
			wantEvents:  []string{"Warning StateMissingAuthInfo spec.authInfo.secretRef.name is not set"},
		},
		{
			name:        "a peer whose Secret is missing, namespace defaulted: MissingAuthInfo",
			objs:        []client.Object{cluster("local", localID, "local"), noNamespace},
			reconciled:  "peer",
			wantType:    v1alpha1.ClusterTypePeer,
			wantState:   v1alpha1.ClusterStateMissingAuthInfo,
			wantMessage: "Secret " + ns + "/peer not found",
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:  {isFalse, v1alpha1.ReasonPeerCluster},
				condReady:  {isFalse, v1alpha1.ReasonMissingAuthInfo},
				condSynced: {isFalse, v1alpha1.ReasonClusterNotConnected},
			},
			wantRequeue: heartbeat,
			wantEvents:  []string{"Warning StateMissingAuthInfo Secret " + ns + "/peer not found"},
		},
		{
			name:        "a peer whose Secret is outside the registry namespace: InvalidAuthInfo, not read",
			objs:        []client.Object{cluster("local", localID, "local"), elsewhere},
			reconciled:  "peer",
			wantType:    v1alpha1.ClusterTypePeer,
			wantState:   v1alpha1.ClusterStateInvalidAuthInfo,
			wantMessage: "spec.authInfo.secretRef must be in the registry namespace " + ns + ", not default",
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:  {isFalse, v1alpha1.ReasonPeerCluster},
				condReady:  {isFalse, v1alpha1.ReasonInvalidAuthInfo},
				condSynced: {isFalse, v1alpha1.ReasonClusterNotConnected},
			},
			wantRequeue: heartbeat,
			wantEvents:  []string{"Warning StateInvalidAuthInfo spec.authInfo.secretRef must be in the registry namespace " + ns + ", not default"},
		},
		{
			name:         "a peer whose Secret cannot be read: Failed",
			objs:         []client.Object{cluster("local", localID, "local"), cluster("peer", peerID, "peer")},
			reconciled:   "peer",
			secretGetErr: secretErr,
			wantType:     v1alpha1.ClusterTypePeer,
			wantState:    v1alpha1.ClusterStateFailed,
			wantMessage:  "reading Secret " + ns + "/peer: etcd is on fire",
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:  {isFalse, v1alpha1.ReasonPeerCluster},
				condReady:  {isFalse, v1alpha1.ReasonMissingAuthInfo},
				condSynced: {isFalse, v1alpha1.ReasonClusterNotConnected},
			},
			wantRequeue: heartbeat,
			wantEvents:  []string{"Warning StateFailed reading Secret " + ns + "/peer: etcd is on fire"},
		},
		{
			name:        "a peer whose Secret has the wrong type: InvalidAuthInfo",
			objs:        []client.Object{cluster("local", localID, "local"), cluster("peer", peerID, "peer"), readerSecret("peer", corev1.SecretTypeOpaque, goodKubeconfig)},
			reconciled:  "peer",
			wantType:    v1alpha1.ClusterTypePeer,
			wantState:   v1alpha1.ClusterStateInvalidAuthInfo,
			wantMessage: `Secret ` + ns + `/peer has type "Opaque", want "` + string(v1alpha1.SecretTypeClusterRegistry) + `"`,
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:  {isFalse, v1alpha1.ReasonPeerCluster},
				condReady:  {isFalse, v1alpha1.ReasonInvalidAuthInfo},
				condSynced: {isFalse, v1alpha1.ReasonClusterNotConnected},
			},
			wantRequeue: heartbeat,
			wantEvents:  []string{`Warning StateInvalidAuthInfo Secret ` + ns + `/peer has type "Opaque", want "` + string(v1alpha1.SecretTypeClusterRegistry) + `"`},
		},
		{
			name:        "a peer whose Secret has no kubeconfig: InvalidAuthInfo",
			objs:        []client.Object{cluster("local", localID, "local"), cluster("peer", peerID, "peer"), readerSecret("peer", v1alpha1.SecretTypeClusterRegistry, map[string][]byte{"other": []byte("x")})},
			reconciled:  "peer",
			wantType:    v1alpha1.ClusterTypePeer,
			wantState:   v1alpha1.ClusterStateInvalidAuthInfo,
			wantMessage: `Secret ` + ns + `/peer has no "` + v1alpha1.KubeconfigKey + `" key`,
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:  {isFalse, v1alpha1.ReasonPeerCluster},
				condReady:  {isFalse, v1alpha1.ReasonInvalidAuthInfo},
				condSynced: {isFalse, v1alpha1.ReasonClusterNotConnected},
			},
			wantRequeue: heartbeat,
			wantEvents:  []string{`Warning StateInvalidAuthInfo Secret ` + ns + `/peer has no "` + v1alpha1.KubeconfigKey + `" key`},
		},
		{
			name:        "a valid peer while the controller starts: no state yet, Ready Unknown",
			objs:        []client.Object{cluster("local", localID, "local"), cluster("peer", peerID, "peer"), readerSecret("peer", v1alpha1.SecretTypeClusterRegistry, goodKubeconfig)},
			reconciled:  "peer",
			wantType:    v1alpha1.ClusterTypePeer,
			wantState:   "",
			wantMessage: "the controller is starting",
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:  {isFalse, v1alpha1.ReasonPeerCluster},
				condReady:  {isUnknown, v1alpha1.ReasonClusterNotConnected},
				condSynced: {isFalse, v1alpha1.ReasonClusterNotConnected},
				// No credential of its own yet: the shared reader Secret.
				v1alpha1.ClusterConditionReaderCredentialReady: {isFalse, v1alpha1.ReasonBootstrapCredential},
			},
			wantCondMsgs: map[v1alpha1.ClusterConditionType]string{condReady: "the controller is starting", condSynced: "the peer is not connected yet"},
			wantRequeue:  heartbeat,
		},
		{
			name:        "a peer whose kubeconfig does not parse: the connection says InvalidAuthInfo",
			objs:        []client.Object{cluster("local", localID, "local"), cluster("peer", peerID, "peer"), readerSecret("peer", v1alpha1.SecretTypeClusterRegistry, map[string][]byte{v1alpha1.KubeconfigKey: []byte("{not yaml")})},
			reconciled:  "peer",
			startPeers:  true,
			wantType:    v1alpha1.ClusterTypePeer,
			wantState:   v1alpha1.ClusterStateInvalidAuthInfo,
			wantMessage: "Secret " + ns + "/peer: ",
			wantConds: map[v1alpha1.ClusterConditionType]cond{
				condLocal:  {isFalse, v1alpha1.ReasonPeerCluster},
				condReady:  {isFalse, v1alpha1.ReasonInvalidAuthInfo},
				condSynced: {isFalse, v1alpha1.ReasonClusterNotConnected},
				v1alpha1.ClusterConditionReaderCredentialReady: {isFalse, v1alpha1.ReasonBootstrapCredential},
			},
			wantRequeue: heartbeat,
			wantEvents:  []string{"Warning StateInvalidAuthInfo Secret " + ns + "/peer: "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var funcs interceptor.Funcs
			if tt.secretGetErr != nil {
				funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*corev1.Secret); ok {
						return tt.secretGetErr
					}
					return c.Get(ctx, key, obj, opts...)
				}
			}
			if tt.reverseLists {
				funcs.List = func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if err := c.List(ctx, list, opts...); err != nil {
						return err
					}
					if l, ok := list.(*v1alpha1.ClusterList); ok {
						slices.Reverse(l.Items)
					}
					return nil
				}
			}
			objs := tt.objs
			if len(tt.prior.Conditions) > 0 {
				objs = nil
				for _, o := range tt.objs {
					if c, ok := o.(*v1alpha1.Cluster); ok && c.Name == tt.reconciled {
						c = c.DeepCopy()
						c.Status = tt.prior
						o = c
					}
					objs = append(objs, o)
				}
			}
			f := newFixture(t, funcs, objs...)
			if tt.versionErr != nil {
				f.r.ServerVersion = func(context.Context) (string, error) { return "", tt.versionErr }
			}
			if tt.startPeers {
				f.startPeers(t)
			}

			res, err := f.reconcile(t, tt.reconciled)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if res.RequeueAfter != tt.wantRequeue {
				t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, tt.wantRequeue)
			}
			got := f.get(t, tt.reconciled).Status
			if got.Type != tt.wantType || got.State != tt.wantState {
				t.Errorf("type %q state %q, want %q %q", got.Type, got.State, tt.wantType, tt.wantState)
			}
			if !strings.HasPrefix(got.Message, tt.wantMessage) || (tt.wantMessage == "") != (got.Message == "") {
				t.Errorf("message %q, want %q", got.Message, tt.wantMessage)
			}
			if diff := cmp.Diff(tt.wantConds, condsOf(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			for typ, msg := range tt.wantCondMsgs {
				if m := condMessage(got, typ); m != msg {
					t.Errorf("condition %s message %q, want %q", typ, m, msg)
				}
			}
			for _, c := range got.Conditions {
				if !c.LastTransitionTime.Time.Equal(t0) || !c.LastHeartbeatTime.Time.Equal(t0) {
					t.Errorf("condition %s: transition %s heartbeat %s, want both %s", c.Type, c.LastTransitionTime, c.LastHeartbeatTime, t0)
				}
			}
			if diff := cmp.Diff(tt.wantMeta, got.ClusterMetadata); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
			events := f.drainEvents()
			if len(events) != len(tt.wantEvents) {
				t.Fatalf("events %q, want %q", events, tt.wantEvents)
			}
			for i := range events {
				if !strings.HasPrefix(events[i], tt.wantEvents[i]) {
					t.Errorf("event %q, want %q", events[i], tt.wantEvents[i])
				}
			}
		})
	}
}

// TestUnchangedStatusIsNotWritten: a second reconcile with nothing changed writes nothing
// and records no event; once the heartbeat period has passed it refreshes the heartbeats
// but keeps the transition times; a change of state moves the transition time and
// records an event.
func TestUnchangedStatusIsNotWritten(t *testing.T) {
	patches := 0
	funcs := interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
	f := newFixture(t, funcs, cluster("local", localID, "local"), cluster("peer", peerID, ""))

	reconcileBoth := func() {
		t.Helper()
		for _, name := range []string{"local", "peer"} {
			if _, err := f.reconcile(t, name); err != nil {
				t.Fatalf("Reconcile %s: %v", name, err)
			}
		}
	}
	reconcileBoth()
	if patches != 2 {
		t.Fatalf("first reconciles wrote the status %d times, want 2", patches)
	}
	f.drainEvents()

	*f.now = t0.Add(heartbeat / 2)
	reconcileBoth()
	if patches != 2 {
		t.Errorf("reconciles with nothing changed wrote the status %d more times, want 0", patches-2)
	}
	if ev := f.drainEvents(); len(ev) != 0 {
		t.Errorf("reconciles with nothing changed recorded events %q", ev)
	}

	later := t0.Add(heartbeat + time.Second)
	*f.now = later
	reconcileBoth()
	if patches != 4 {
		t.Errorf("reconciles after the heartbeat period wrote the status %d more times, want 2", patches-2)
	}
	for _, name := range []string{"local", "peer"} {
		for _, c := range f.get(t, name).Status.Conditions {
			if !c.LastHeartbeatTime.Time.Equal(later) || !c.LastTransitionTime.Time.Equal(t0) {
				t.Errorf("%s condition %s: heartbeat %s transition %s, want %s and %s", name, c.Type, c.LastHeartbeatTime, c.LastTransitionTime, later, t0)
			}
		}
	}
	if ev := f.drainEvents(); len(ev) != 0 {
		t.Errorf("heartbeats recorded events %q", ev)
	}

	// A second Cluster claims the local ID: LocalConflict turns True (its transition
	// moves, LocalCluster's does not), the state turns Failed and an event says so.
	if err := f.client.Create(context.Background(), cluster("copy", localID, "copy")); err != nil {
		t.Fatal(err)
	}
	changed := later.Add(time.Second)
	*f.now = changed
	if _, err := f.reconcile(t, "local"); err != nil {
		t.Fatal(err)
	}
	if patches != 5 {
		t.Errorf("a conflict wrote the status %d more times, want 1", patches-4)
	}
	st := f.get(t, "local").Status
	conflict, _ := conditions.Get(st.Conditions, condConflict)
	local, _ := conditions.Get(st.Conditions, condLocal)
	if st.State != v1alpha1.ClusterStateFailed || conflict.Status != corev1.ConditionTrue {
		t.Errorf("after a conflict: state %q, LocalConflict %s", st.State, conflict.Status)
	}
	if !conflict.LastTransitionTime.Time.Equal(changed) || !local.LastTransitionTime.Time.Equal(t0) || !local.LastHeartbeatTime.Time.Equal(later) {
		t.Errorf("after a conflict: LocalConflict transition %s (want %s), LocalCluster transition %s heartbeat %s (want %s, %s)",
			conflict.LastTransitionTime, changed, local.LastTransitionTime, local.LastHeartbeatTime, t0, later)
	}
	if ev := f.drainEvents(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning StateFailed Clusters copy, local all claim") {
		t.Errorf("after a conflict: events %q, want one Warning StateFailed", ev)
	}
}

// TestPeerConnections: the reconciler drops the connection of a Cluster that is deleted,
// and of a Cluster that turns out to be the local one.
func TestPeerConnections(t *testing.T) {
	bad := map[string][]byte{v1alpha1.KubeconfigKey: []byte("{not yaml")}
	tests := []struct {
		name   string
		change func(t *testing.T, f *fixture)
	}{
		{"the Cluster is deleted", func(t *testing.T, f *fixture) {
			if err := f.client.Delete(context.Background(), cluster("peer", peerID, "peer")); err != nil {
				t.Fatal(err)
			}
		}},
		{"the Cluster now has the local ID", func(t *testing.T, f *fixture) {
			c := f.get(t, "peer")
			c.Spec.ClusterID = localID
			if err := f.client.Update(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}},
		{"the Cluster is disabled", func(t *testing.T, f *fixture) {
			c := f.get(t, "peer")
			c.Annotations = map[string]string{v1alpha1.ClusterDisabledAnnotation: "true"}
			if err := f.client.Update(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, interceptor.Funcs{}, cluster("local", localID, "local"), cluster("peer", peerID, "peer"),
				readerSecret("peer", v1alpha1.SecretTypeClusterRegistry, bad))
			f.startPeers(t)
			if _, err := f.reconcile(t, "peer"); err != nil {
				t.Fatal(err)
			}
			if _, ok := f.peers.Get("peer"); !ok {
				t.Fatal("no connection to the peer after its first reconcile")
			}
			tt.change(t, f)
			res, err := f.reconcile(t, "peer")
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if _, ok := f.peers.Get("peer"); ok {
				t.Errorf("the connection to the peer is still there")
			}
			if tt.name == "the Cluster is deleted" && res != (reconcile.Result{}) {
				t.Errorf("result %+v for a deleted Cluster, want none", res)
			}
		})
	}
}

// TestReconcileErrors: a failure to read is returned; a failure to write the status is
// returned wrapped, but a Cluster deleted in between is not an error.
func TestReconcileErrors(t *testing.T) {
	boom := errors.New("boom")
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "clusters"}, "local")
	tests := []struct {
		name    string
		funcs   interceptor.Funcs
		wantErr error
	}{
		{"get fails", interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return boom
		}}, boom},
		{"list fails", interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*v1alpha1.ClusterList); ok {
				return boom
			}
			return c.List(ctx, list, opts...)
		}}, boom},
		{"the status write fails", interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return boom
		}}, boom},
		{"the Cluster is gone when the status is written", interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return notFound
		}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.funcs, cluster("local", localID, "local"))
			_, err := f.reconcile(t, "local")
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("Reconcile: %v, want %v", err, tt.wantErr)
			}
			if tt.name == "the status write fails" && (err == nil || !strings.Contains(err.Error(), "writing the status of Cluster local")) {
				t.Errorf("Reconcile: %v, want it to name the Cluster", err)
			}
		})
	}
}
