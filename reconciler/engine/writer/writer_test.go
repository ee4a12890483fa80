package writer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

var (
	cmGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	cm    = Target{GVK: cmGVK, Namespace: "ns", Name: "cm"}
)

func configMap(data string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"k": data}}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName("cm")
	return u
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

func testMapper() *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(cmGVK, meta.RESTScopeNamespace)
	return m
}

// fakeWriter returns a Writer of a fake cluster (no REST config: the dynamic client
// writes), with namespaces nss, and the fake dynamic client.
func fakeWriter(t *testing.T, nss ...string) (*Writer, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	scheme := testScheme(t)
	var objs []runtime.Object
	for _, ns := range nss {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{cmGVR: "ConfigMapList"})
	w, err := New(Options{
		Namespace: "cluster-registry", Dynamic: dyn, Mapper: testMapper(),
		Reader: crfake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, dyn
}

// TestOf: what comes from a member is written as the member; the built-in rule's copies,
// and the delete of a copy whose origin is no longer a member, as the controller; what a
// non-member serves, never.
func TestOf(t *testing.T) {
	w, _ := fakeWriter(t)
	policy := planner.PolicyOf(nil, []v1alpha1.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "peer", Namespace: "cluster-registry"}, Spec: v1alpha1.ClusterSpec{ClusterID: "uid-peer"}},
	}, "cluster-registry", "uid-local")
	member := Identity(v1alpha1.MemberUser("cluster-registry", "peer"))
	for _, tc := range []struct {
		name    string
		origin  types.UID
		rule    string
		del     bool
		want    Identity
		wantErr bool
	}{
		{name: "a member's copy", origin: "uid-peer", rule: "cms", want: member},
		{name: "a member's delete", origin: "uid-peer", rule: "cms", del: true, want: member},
		{name: "the built-in rule", origin: "uid-peer", rule: v1alpha1.CoreRuleName, want: Self},
		{name: "a departed member's delete", origin: "uid-gone", rule: "cms", del: true, want: Self},
		{name: "a non-member's copy", origin: "uid-gone", rule: "cms", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := w.Of(policy, tc.origin, tc.rule, tc.del)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Of = %q, %v; want an error: %v", got, err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("Of = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWriteThroughDynamic: without a REST config, a copy is created and updated through
// the dynamic client with the registry's field manager, and comes back as stored; a kind
// the cluster does not serve is an error that says so.
func TestWriteThroughDynamic(t *testing.T) {
	w, dyn := fakeWriter(t, "ns")
	ctx := context.Background()
	if _, err := w.Write(ctx, Self, cm, configMap("v1"), false); err != nil {
		t.Fatal(err)
	}
	stored, err := w.Write(ctx, Self, cm, configMap("v2"), true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(configMap("v2").Object["data"], stored.Object["data"]); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	var got []string
	for _, a := range dyn.Actions() {
		got = append(got, a.GetVerb()+" "+a.GetResource().Resource)
	}
	if diff := cmp.Diff([]string{"create configmaps", "update configmaps"}, got); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	unserved := Target{GVK: schema.GroupVersionKind{Group: "x.io", Version: "v1", Kind: "Widget"}, Name: "w"}
	if _, err := w.Write(ctx, Self, unserved, configMap("v"), false); err == nil || !strings.Contains(err.Error(), "is not served by the local cluster") {
		t.Errorf("a write of an unserved kind returned %v", err)
	}
}

// TestEnsureNamespace: a namespace that exists is left alone; a missing one is created
// (annotated with the rule) when a rule creates namespaces, and is ErrNamespaceMissing
// otherwise; one created meanwhile is no error.
func TestEnsureNamespace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ns        string
		createdBy string
		exists    bool
		// race makes the create find the namespace already there.
		race        bool
		wantCreate  bool
		wantMissing bool
	}{
		{name: "cluster-scoped", ns: ""},
		{name: "exists", ns: "ns", exists: true, createdBy: "cms"},
		{name: "missing, created by the rule", ns: "ns", createdBy: "cms", wantCreate: true},
		{name: "missing, the rule does not create namespaces", ns: "ns", wantMissing: true},
		{name: "created meanwhile", ns: "ns", createdBy: "cms", race: true, wantCreate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nss []string
			if tc.exists {
				nss = append(nss, tc.ns)
			}
			w, dyn := fakeWriter(t, nss...)
			if tc.race {
				dyn.PrependReactor("create", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, fmt.Errorf("wrapped: %w", errAlreadyExists())
				})
			}
			err := w.EnsureNamespace(context.Background(), Self, tc.ns, tc.createdBy)
			if got := errors.Is(err, planner.ErrNamespaceMissing); got != tc.wantMissing {
				t.Errorf("EnsureNamespace = %v, want ErrNamespaceMissing: %v", err, tc.wantMissing)
			}
			if !tc.wantMissing && err != nil {
				t.Fatal(err)
			}
			var created []string
			for _, a := range dyn.Actions() {
				if c, ok := a.(clienttesting.CreateAction); ok && a.GetResource() == nsGVR {
					if u, ok := c.GetObject().(*unstructured.Unstructured); ok {
						created = append(created, u.GetName()+" by "+u.GetAnnotations()[v1alpha1.CreatedByAnnotation])
					} else {
						created = append(created, "?")
					}
				}
			}
			var want []string
			if tc.wantCreate {
				want = []string{tc.ns + " by " + tc.createdBy}
			}
			if diff := cmp.Diff(want, created); diff != "" {
				t.Errorf("namespaces created (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMappingKept: a REST mapping is looked up once, until it is forgotten.
func TestMappingKept(t *testing.T) {
	m := &countingMapper{RESTMapper: testMapper()}
	w, err := New(Options{Mapper: m})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := w.Mapping(cmGVK); err != nil {
			t.Fatal(err)
		}
	}
	w.ForgetMappings(cmGVK)
	if _, err := w.Mapping(cmGVK); err != nil {
		t.Fatal(err)
	}
	w.ForgetMappings()
	if _, err := w.Mapping(cmGVK); err != nil {
		t.Fatal(err)
	}
	if m.n != 3 {
		t.Errorf("the mapper was asked %d times, want 3", m.n)
	}
}

type countingMapper struct {
	meta.RESTMapper
	n int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.n++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// answer is a test Answer: the object the API server returned.
type answer struct {
	unstructured.Unstructured
}

func (a *answer) Object(schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	return &a.Unstructured, nil
}

// TestWriteThroughRESTAsTheMember: with a REST config, a copy is created with a POST and
// updated with a PUT, with the registry's field manager, impersonating the member (in the
// members' group) or as the controller itself; the namespace a copy needs is created as
// the member too; the answer is decoded into an Answer.
func TestWriteThroughRESTAsTheMember(t *testing.T) {
	type request struct {
		Method, Path, FieldManager, User string
		Groups                           []string
	}
	var mu sync.Mutex
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, request{r.Method, r.URL.Path, r.URL.Query().Get("fieldManager"), r.Header.Get("Impersonate-User"), r.Header.Values("Impersonate-Group")})
		mu.Unlock()
		var u map[string]any
		_ = json.Unmarshal(body, &u)
		u["metadata"].(map[string]any)["resourceVersion"] = "7"
		out, _ := json.Marshal(u)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	scheme := testScheme(t)
	cfg := &rest.Config{Host: srv.URL}
	codecs := serializer.NewCodecFactory(runtime.NewScheme())
	w, err := New(Options{
		Namespace: "cluster-registry", Config: cfg, HTTPClient: srv.Client(), Mapper: testMapper(),
		Reader: crfake.NewClientBuilder().WithScheme(scheme).Build(),
		RESTClient: func(hc *http.Client) (rest.Interface, error) {
			c := rest.CopyConfig(cfg)
			c.NegotiatedSerializer = codecs.WithoutConversion()
			c.ContentType = runtime.ContentTypeJSON
			return rest.UnversionedRESTClientForConfigAndClient(c, hc)
		},
		NewAnswer: func() Answer { return &answer{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	policy := planner.PolicyOf(nil, []v1alpha1.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "peer", Namespace: "cluster-registry"}, Spec: v1alpha1.ClusterSpec{ClusterID: "uid-peer"}},
	}, "cluster-registry", "uid-local")
	member, err := w.Of(policy, "uid-peer", "cms", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.EnsureNamespace(ctx, member, "ns", "cms"); err != nil {
		t.Fatal(err)
	}
	stored, err := w.Write(ctx, member, cm, configMap("v1"), false)
	if err != nil {
		t.Fatal(err)
	}
	if stored.GetResourceVersion() != "7" {
		t.Errorf("stored %v, want the answer's resourceVersion 7", stored.Object)
	}
	if _, err := w.Write(ctx, Self, cm, configMap("v2"), true); err != nil {
		t.Fatal(err)
	}
	asMember := []string{v1alpha1.MembersGroup}
	want := []request{
		{Method: http.MethodPost, Path: "/api/v1/namespaces", FieldManager: v1alpha1.FieldManager, User: string(member), Groups: asMember},
		{Method: http.MethodPost, Path: "/api/v1/namespaces/ns/configmaps", FieldManager: v1alpha1.FieldManager, User: string(member), Groups: asMember},
		{Method: http.MethodPut, Path: "/api/v1/namespaces/ns/configmaps/cm", FieldManager: v1alpha1.FieldManager},
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func errAlreadyExists() error {
	return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "namespaces"}, "ns")
}
