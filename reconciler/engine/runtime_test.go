package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/rulestatus"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/views"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/writer"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// The tests of this file run the engine's runtime (its writes, settle, waits and
// backoffs) without an API server: a fake dynamic client for the copies, a fake
// controller-runtime client for namespaces, and a fake clock that only moves when the
// test steps it. The fake clock starts years before the real time, so that a decision
// taken on the real clock instead of the engine's shows.

var (
	cmGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	// fakeStart is when the fake clock starts.
	fakeStart = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
)

// testEngine is an engine built by New on fakes, with a rule entry for ConfigMaps.
type testEngine struct {
	e     *Engine
	dyn   *dynamicfake.FakeDynamicClient
	clock *clocktesting.FakeClock
	rule  *ruleEntry
}

func newTestEngine(t *testing.T, objs ...runtime.Object) *testEngine {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(cmGVK, meta.RESTScopeNamespace)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{cmGVR: "ConfigMapList"}, objs...)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
		&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "peer"}, Spec: v1alpha1.ClusterSpec{ClusterID: "uid-peer"}}).Build()
	clk := clocktesting.NewFakeClock(fakeStart)
	e, err := New(Options{
		LocalID: "uid-local", LocalName: "local", Namespace: "cluster-registry",
		Client: cl, Dynamic: dyn, Mapper: mapper, Peers: &peers.Manager{},
		Metrics: NewMetrics(nil), Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.log = logr.Discard()
	t.Cleanup(e.queue.ShutDown)
	rule := newEntry(&v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "cms"}}, nil, nil, false)
	return &testEngine{e: e, dyn: dyn, clock: clk, rule: rule}
}

// copyOf is the copy of ConfigMap ns/cm that the rule cms writes, with a status.
func copyOf(data string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "ns", "name": "cm", "labels": map[string]any{v1alpha1.OwnershipLabel: "uid-peer"}},
		"data":     map[string]any{"k": data},
		"status":   map[string]any{"phase": data},
	}}
	return u
}

func writeAction(typ planner.ActionType, obj *unstructured.Unstructured, syncStatus bool) planner.Action {
	return planner.Action{Type: typ, Object: obj, Source: &planner.Candidate{Rule: "cms", Peer: "peer", PeerID: "uid-peer", Origin: "uid-peer", Object: obj, SyncStatus: syncStatus}}
}

var cmItem = item{gvk: cmGVK, namespace: "ns", name: "cm"}

// statusWrites counts the writes of the status subresource the fake client saw.
func statusWrites(dyn *dynamicfake.FakeDynamicClient) int {
	n := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// TestExecuteStatusWrite: the status write that follows the write of a copy whose rule
// syncs status is not dropped when it fails: execute returns the error (processNext
// counts it and looks at the copy again with backoff), the rule reports the copy as
// failing, not synced, and the refusal is counted. The copy's last sync time is the
// engine's clock.
func TestExecuteStatusWrite(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	type outcome struct {
		Err          bool
		Synced       bool
		Failure      rulestatus.Failure
		StatusWrites int
		Refused      float64
		LastSync     time.Time
	}
	tests := []struct {
		name       string
		typ        planner.ActionType
		syncStatus bool
		statusErr  error // what the API server answers to the status write
		want       outcome
	}{
		{
			name: "create, status written", typ: planner.ActionCreate, syncStatus: true,
			want: outcome{Synced: true, StatusWrites: 1, LastSync: fakeStart},
		},
		{
			name: "create, status write forbidden", typ: planner.ActionCreate, syncStatus: true,
			statusErr: apierrors.NewForbidden(gr, "cm", fmt.Errorf("no")),
			want: outcome{Err: true, StatusWrites: 1, Refused: 1, LastSync: fakeStart,
				Failure: rulestatus.Failure{Reason: v1alpha1.ReasonWriteForbidden}},
		},
		{
			name: "update, status write conflicts", typ: planner.ActionUpdate, syncStatus: true,
			statusErr: apierrors.NewConflict(gr, "cm", fmt.Errorf("changed")),
			want: outcome{Err: true, StatusWrites: 1, Refused: 1, LastSync: fakeStart,
				Failure: rulestatus.Failure{Reason: v1alpha1.ReasonWriteFailed}},
		},
		{
			name: "update, no status subresource: the write carried it", typ: planner.ActionUpdate, syncStatus: true,
			statusErr: apierrors.NewNotFound(gr, "cm"),
			want:      outcome{Synced: true, StatusWrites: 1, LastSync: fakeStart},
		},
		{
			name: "create, the rule does not sync status", typ: planner.ActionCreate,
			statusErr: apierrors.NewForbidden(gr, "cm", fmt.Errorf("no")),
			want:      outcome{Synced: true, LastSync: fakeStart},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var existing []runtime.Object
			if tt.typ == planner.ActionUpdate {
				existing = append(existing, copyOf("old"))
			}
			te := newTestEngine(t, existing...)
			if tt.statusErr != nil {
				te.dyn.PrependReactor("update", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
					if a.GetSubresource() == "status" {
						return true, nil, tt.statusErr
					}
					return false, nil, nil
				})
			}
			err := te.e.execute(context.Background(), cmItem, writeAction(tt.typ, copyOf("new"), tt.syncStatus), []*ruleEntry{te.rule})
			r := te.rule
			f, _ := r.track.Failed(cmItem)
			f.Message = "" // its text is the API server's
			got := outcome{
				Err: err != nil, Synced: r.track.IsSynced(cmItem), Failure: f, StatusWrites: statusWrites(te.dyn),
				Refused:  testutil.ToFloat64(te.e.opts.Metrics.refused.WithLabelValues("cms", f.Reason)),
				LastSync: r.track.LastSync(),
			}
			if got.Failure.Reason == "" {
				got.Refused = 0 // no failure: no reason to count under
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.want.Err {
				if _, ferr := te.dyn.Resource(cmGVR).Namespace("ns").Get(context.Background(), "cm", metav1.GetOptions{}); ferr != nil {
					t.Errorf("the copy itself was not written: %v", ferr)
				}
			}
		})
	}
}

// TestCreateWaitFollowsTheClock: the wait of a create for the views still syncing is
// bounded by createWait from when the object was queued, on the engine's clock.
func TestCreateWaitFollowsTheClock(t *testing.T) {
	unsynced := map[types.UID]bool{"uid-peer": true}
	tests := []struct {
		name    string
		elapsed time.Duration // on the fake clock, since the object was queued
		want    bool
	}{
		{name: "just queued", elapsed: 0, want: true},
		{name: "within createWait", elapsed: createWait - time.Millisecond, want: true},
		{name: "past createWait", elapsed: createWait + time.Millisecond, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := newTestEngine(t)
			te.e.add(cmItem, te.clock.Now())
			te.clock.Step(tt.elapsed)
			if got := te.e.waitForViews(cmItem, unsynced, nil); got != tt.want {
				t.Errorf("waitForViews after %s = %v, want %v", tt.elapsed, got, tt.want)
			}
		})
	}
}

// TestSettleFollowsTheClock: the settle window, the holds and the refusals for good are
// measured on the engine's clock: a copy rewritten too often within the window is held
// for Hold, content refused for good is not written again for MaxHold, and both are
// written again once the clock has moved past them.
func TestSettleFollowsTheClock(t *testing.T) {
	p := planner.DefaultSettlePolicy()
	immutable := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "cm", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "field is immutable")})
	type verdict struct {
		Hold     bool
		Rejected bool
		Until    time.Duration // from the fake clock's start; 0 when not held
	}
	type check struct {
		at   time.Duration // the fake clock, from its start
		want verdict
	}
	tests := []struct {
		name string
		// writes are when the copy is written (as stored), from the fake clock's start.
		writes []time.Duration
		// refusedAt, when set, is when the API server refuses the content for good.
		refusedAt time.Duration
		refused   bool
		checks    []check
	}{
		{
			name:   "written MaxWrites times within the window: held for Hold, then written again",
			writes: []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second},
			checks: []check{
				{at: 5 * time.Second, want: verdict{Hold: true, Until: 5*time.Second + p.Hold}},
				{at: 5*time.Second + p.Hold - time.Millisecond, want: verdict{Hold: true, Until: 5*time.Second + p.Hold}},
				{at: 5*time.Second + p.Hold},
			},
		},
		{
			name:   "the same writes spread over more than the window: not held",
			writes: []time.Duration{0, p.Window / 4, p.Window / 2, 3 * p.Window / 4, p.Window},
			checks: []check{{at: p.Window}},
		},
		{
			name:    "refused for good: not written again for MaxHold",
			refused: true, refusedAt: time.Minute,
			checks: []check{
				{at: time.Minute, want: verdict{Hold: true, Rejected: true, Until: time.Minute + p.MaxHold}},
				{at: time.Minute + p.MaxHold - time.Millisecond, want: verdict{Hold: true, Rejected: true, Until: time.Minute + p.MaxHold}},
				{at: time.Minute + p.MaxHold},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := newTestEngine(t, copyOf("v"))
			obj := copyOf("v")
			act := writeAction(planner.ActionUpdate, obj, false)
			at := func(d time.Duration) { te.clock.SetTime(fakeStart.Add(d)) }
			for _, w := range tt.writes {
				at(w)
				te.e.written(cmItem, act.Source, obj)
			}
			if tt.refused {
				at(tt.refusedAt)
				ri, err := te.e.writes.Client(writer.Self, cmGVK, "ns")
				if err != nil {
					t.Fatal(err)
				}
				if err := te.e.writeFailed(context.Background(), cmItem, act, te.rule, ri, immutable); err != nil {
					t.Fatalf("writeFailed of a refusal for good = %v, want nil (not retried)", err)
				}
			}
			var got, want []verdict
			for _, c := range tt.checks {
				at(c.at)
				v := te.e.settle(cmItem, act.Source, obj)
				g := verdict{Hold: v.Hold, Rejected: v.Rejected}
				if v.Hold {
					g.Until = v.Until.Sub(fakeStart)
				}
				got, want = append(got, g), append(want, c.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRefreshBackoffFollowsTheClock: a refresh that fails (a kind the local cluster does
// not serve) is tried again after a backoff on the engine's clock, doubling each time.
func TestRefreshBackoffFollowsTheClock(t *testing.T) {
	te := newTestEngine(t) // its mapper does not serve ResourceSyncRules: the built-in rule fails
	refreshed := func() bool {
		select {
		case <-te.e.refresh:
			return true
		default:
			return false
		}
	}
	type step struct {
		Refresh bool          // doRefresh runs
		Advance time.Duration // then the clock moves
		Retried bool          // a refresh is asked for
	}
	steps := []step{
		{Refresh: true, Advance: time.Second - time.Millisecond},
		{Advance: time.Millisecond, Retried: true},
		{Refresh: true, Advance: 2*time.Second - time.Millisecond},
		{Advance: time.Millisecond, Retried: true},
		{Refresh: true, Advance: 4 * time.Second, Retried: true},
	}
	var got []step
	for _, s := range steps {
		if s.Refresh {
			te.e.doRefresh(context.Background())
		}
		te.clock.Step(s.Advance)
		got = append(got, step{Refresh: s.Refresh, Advance: s.Advance, Retried: refreshed()})
	}
	if diff := cmp.Diff(steps, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := te.e.rules[v1alpha1.CoreRuleName].getErr(); err == nil {
		t.Error("the built-in rule reports no error for a kind the cluster does not serve")
	}
}

// TestOverCapRetryFollowsTheClock: a scope over the cap is not started again before its
// wait is over on the engine's clock (the views' retries are timed by Options.Clock), and
// is once the clock has moved past it.
func TestOverCapRetryFollowsTheClock(t *testing.T) {
	second := copyOf("b")
	second.SetName("cm-2")
	te := newTestEngine(t, copyOf("a"), second)
	ws, ok := te.e.views.(*views.Watchers)
	if !ok {
		t.Fatalf("the engine's views are a %T, not the views package's", te.e.views)
	}
	s := views.Scope{Cluster: "peer", GVK: cmGVK, Namespace: "ns"}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { ws.Retain(func(views.Scope) bool { return false }); cancel() })
	client, ignore := views.Client{Dynamic: te.dyn}, func(views.Scope, *views.Cached, *views.Cached) {}
	// Two objects over a cap of one: the scope stops at its first list.
	if err := ws.Ensure(ctx, s, "", 1, client, te.e.opts.Mapper, ignore); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return ws.OverCapErr(s) != nil, nil
	}); err != nil {
		t.Fatalf("the scope did not go over the cap: %v", err)
	}
	if err := te.dyn.Resource(cmGVR).Namespace("ns").Delete(ctx, "cm-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	type step struct {
		Advance time.Duration
		Started bool
	}
	want := []step{{Advance: 0}, {Advance: DefaultOverCapRetry - time.Millisecond}, {Advance: time.Millisecond, Started: true}}
	var got []step
	for _, st := range want {
		te.clock.Step(st.Advance)
		err := ws.Ensure(ctx, s, "", 1, client, te.e.opts.Mapper, ignore)
		running := ws.Running(s)
		if running != (err == nil) {
			t.Errorf("Ensure = %v, but running = %v", err, running)
		}
		got = append(got, step{Advance: st.Advance, Started: running})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
