package engine

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// TestWritesAsTheMember: every write of what comes from a member reaches the API server
// impersonating the member's identity in the members' group, so that this cluster's RBAC
// authorizes it; the built-in rule's copies, and the delete of a copy whose origin is no
// longer a member, are the controller's own writes (no impersonation).
func TestWritesAsTheMember(t *testing.T) {
	type request struct {
		Method, Path, User string
		Groups             []string
	}
	var mu sync.Mutex
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, request{Method: r.Method, Path: r.URL.Path, User: r.Header.Get("Impersonate-User"), Groups: r.Header.Values("Impersonate-Group")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodDelete {
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()

	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl := crfake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
		&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "peer"}, Spec: v1alpha1.ClusterSpec{ClusterID: "uid-peer"}},
		&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "origin"}, Spec: v1alpha1.ClusterSpec{ClusterID: "uid-origin"}},
	).Build()
	cfg := &rest.Config{Host: srv.URL}
	hc := srv.Client()
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(cmGVK, meta.RESTScopeNamespace)
	e, err := New(Options{
		LocalID: "uid-local", LocalName: "local", Namespace: "cluster-registry",
		Client: cl, Dynamic: dyn, Config: cfg, HTTPClient: hc, Mapper: mapper, Peers: &peers.Manager{},
		Metrics: NewMetrics(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.queue.ShutDown)

	marked := func(origin string) *unstructured.Unstructured {
		u := copyOf("v")
		u.SetAnnotations(map[string]string{v1alpha1.OwnershipAnnotation: origin})
		u.SetLabels(map[string]string{v1alpha1.RuleLabel: "cms"})
		return u
	}
	member := request{User: "system:serviceaccount:cluster-registry:member-peer", Groups: []string{v1alpha1.MembersGroup}}
	relayed := writeAction(planner.ActionCreate, copyOf("v"), false)
	relayed.Source.Origin = "uid-origin" // what the relay says; peer served it
	core := writeAction(planner.ActionCreate, copyOf("v"), false)
	core.Source.Rule = v1alpha1.CoreRuleName
	for _, tc := range []struct {
		name string
		act  planner.Action
		want request
	}{
		{"a member's copy is created as the member", writeAction(planner.ActionCreate, copyOf("v"), false), member},
		{"and updated as the member", writeAction(planner.ActionUpdate, copyOf("v"), false), member},
		{"a relayed copy is written as the relay, never as the origin it names", relayed, member},
		{"and deleted as the member", planner.Action{Type: planner.ActionDelete, Object: marked("uid-peer")}, member},
		{"a copy of a departed member is deleted by the controller", planner.Action{Type: planner.ActionDelete, Object: marked("uid-gone")}, request{}},
		{"the built-in rule writes as the controller", core, request{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			if err := e.execute(context.Background(), cmItem, tc.act, nil); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) == 0 {
				t.Fatal("no request reached the API server")
			}
			for _, r := range got {
				if diff := cmp.Diff(tc.want, request{User: r.User, Groups: r.Groups}); diff != "" {
					t.Errorf("%s %s (-want +got):\n%s", r.Method, r.Path, diff)
				}
			}
		})
	}

	t.Run("a copy served by a non-member is never written", func(t *testing.T) {
		act := writeAction(planner.ActionCreate, copyOf("v"), false)
		act.Source.PeerID = "uid-gone"
		err := e.execute(context.Background(), cmItem, act, nil)
		if err == nil || !strings.Contains(err.Error(), "not a member") {
			t.Fatalf("execute = %v, want the origin refused as not a member", err)
		}
	})
}
