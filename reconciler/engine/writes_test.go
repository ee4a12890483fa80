package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/engine/writer"
)

// TestObserveStages: a write's stages are the wait in the queue (from the change seen
// to the reconcile's start), the decision (to the request) and the request; a failed
// write records none.
func TestObserveStages(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	e := &Engine{opts: Options{Clock: clk, Metrics: NewMetrics(nil)}}
	it := item{name: "x"}
	e.seen.Store(it, t0)
	ctx := withReconcileStart(context.Background(), t0.Add(3*time.Millisecond))
	sent := t0.Add(5 * time.Millisecond)
	clk.SetTime(t0.Add(9 * time.Millisecond))
	e.observeStages(ctx, it, sent, errors.New("refused"))
	e.observeStages(ctx, it, sent, nil)
	got := map[string][2]float64{} // stage -> count, sum in ms
	for _, stage := range []string{"queue", "decide", "write"} {
		var m dto.Metric
		if err := e.opts.Metrics.stages.WithLabelValues(stage).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		got[stage] = [2]float64{float64(m.GetHistogram().GetSampleCount()), math.Round(m.GetHistogram().GetSampleSum() * 1e6 / 1e3)}
	}
	want := map[string][2]float64{"queue": {1, 3}, "decide": {1, 2}, "write": {1, 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stages (count, ms) (-want +got):\n%s", diff)
	}
}

// TestWriteCopyThroughREST: with the local cluster's REST client, a copy is created with
// a POST to its resource and updated with a PUT to its name, both with the registry's
// field manager; the answer comes back as the object stored (less managedFields), and a
// refusal as the API error the write's callers classify.
func TestWriteCopyThroughREST(t *testing.T) {
	type request struct{ Method, Path, FieldManager, Body string }
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, request{r.Method, r.URL.Path, r.URL.Query().Get("fieldManager"), string(body)})
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost && strings.Contains(string(body), `"taken"`) {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"taken\" already exists","reason":"AlreadyExists","code":409}`))
			return
		}
		var u map[string]any
		_ = json.Unmarshal(body, &u)
		u["metadata"].(map[string]any)["resourceVersion"] = "7"
		u["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": v1alpha1.FieldManager}}
		u["data"].(map[string]any)["defaulted"] = "by the server"
		out, _ := json.Marshal(u)
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	te := newTestEngine(t)
	w, err := writer.New(writerOptions(Options{Config: &rest.Config{Host: srv.URL}, HTTPClient: srv.Client(), Mapper: te.e.opts.Mapper}))
	if err != nil {
		t.Fatal(err)
	}
	it := writer.Target{GVK: cmGVK, Namespace: "ns", Name: "cm"}
	ctx := context.Background()
	stored, err := w.Write(ctx, writer.Self, it, copyOf("v1"), false)
	if err != nil {
		t.Fatal(err)
	}
	want := copyOf("v1")
	want.SetResourceVersion("7")
	want.Object["data"].(map[string]any)["defaulted"] = "by the server"
	if diff := cmp.Diff(want.Object, stored.Object); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	if _, err := w.Write(ctx, writer.Self, it, copyOf("v2"), true); err != nil {
		t.Fatal(err)
	}
	taken := copyOf("taken")
	taken.Object["data"] = map[string]any{"k": "taken"}
	if _, err := w.Write(ctx, writer.Self, it, taken, false); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a create refused as AlreadyExists returned %v", err)
	}
	var shape []request
	for _, r := range got {
		shape = append(shape, request{Method: r.Method, Path: r.Path, FieldManager: r.FieldManager})
	}
	wantShape := []request{
		{Method: http.MethodPost, Path: "/api/v1/namespaces/ns/configmaps", FieldManager: v1alpha1.FieldManager},
		{Method: http.MethodPut, Path: "/api/v1/namespaces/ns/configmaps/cm", FieldManager: v1alpha1.FieldManager},
		{Method: http.MethodPost, Path: "/api/v1/namespaces/ns/configmaps", FieldManager: v1alpha1.FieldManager},
	}
	if diff := cmp.Diff(wantShape, shape); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if len(got) > 1 && !strings.Contains(got[1].Body, `"v2"`) {
		t.Errorf("the update sent %s", got[1].Body)
	}
}

// TestInTheWayBounded: beyond maxKeyWatches objects of a kind in the way of copies, the
// local informers of the kind go back to carrying every object instead of one watch per
// object; an object that is a copy (the cache was behind) is left to its own event.
func TestInTheWayBounded(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	object := func(name string, lbls map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": "ns", "name": name, "labels": lbls}}}
	}
	made := object("made-here", map[string]any{"app": "x"})
	copied := object("a-copy", map[string]any{v1alpha1.OwnershipLabel: "uid-peer"})
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), made, copied)
	ri := dyn.Resource(gvr).Namespace("ns")
	// As many objects of the kind as the bound are watched by name already.
	e := &Engine{views: &fakeViews{keyWatches: maxKeyWatches}, refresh: make(chan struct{}, 1), log: logr.Discard()}
	e.inTheWay(context.Background(), item{gvk: cm, namespace: "ns", name: "a-copy"}, ri)
	if got := e.localSelector(cm); got != copiesSelector {
		t.Fatalf("after a copy was found: local selector %q, want %q", got, copiesSelector)
	}
	e.inTheWay(context.Background(), item{gvk: cm, namespace: "ns", name: "made-here"}, ri)
	if got := e.localSelector(cm); got != "" {
		t.Errorf("after %d objects in the way: local selector %q, want every object", maxKeyWatches+1, got)
	}
	if !e.everyLocal([]schema.GroupVersionKind{cm}) {
		t.Error("everyLocal: false, want true")
	}
	select {
	case <-e.refresh:
	default:
		t.Error("the watches were not derived again")
	}
	if got := e.localSelector(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}); got != copiesSelector {
		t.Errorf("another kind: local selector %q, want %q", got, copiesSelector)
	}
}
