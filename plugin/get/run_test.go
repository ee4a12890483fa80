package get

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// fakeAPI is the HTTP side of a fake cluster for get's clientset: the kube-system
// namespace, and the registry's resources as server-side Tables with the CRDs' printer
// columns, as the API server builds them.
type fakeAPI struct {
	uid types.UID

	mu      sync.Mutex
	objects map[string][]*unstructured.Unstructured // by resource
}

// set replaces the objects of resource, while get may be reading them.
func (a *fakeAPI) set(resource string, objs ...*unstructured.Unstructured) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.objects[resource] = objs
}

// crdColumns returns the printer columns of the registry's CRD for resource.
func crdColumns(resource string) ([]apiextensionsv1.CustomResourceColumnDefinition, error) {
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "crds", v1alpha1.GroupVersion.Group+"_"+resource+".yaml"))
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, err
	}
	return crd.Spec.Versions[0].AdditionalPrinterColumns, nil
}

func (a *fakeAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	reply := func(obj any) (*http.Response, error) {
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(b)), Request: req}, nil
	}
	prefix := "/apis/" + v1alpha1.GroupVersion.String() + "/"
	switch {
	case req.URL.Path == "/api/v1/namespaces/kube-system":
		return reply(&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: a.uid},
		})
	case strings.HasPrefix(req.URL.Path, prefix) && strings.Contains(req.Header.Get("Accept"), "as=Table"):
		resource := strings.TrimPrefix(req.URL.Path, prefix)
		columns, err := crdColumns(resource)
		if err != nil {
			return nil, err
		}
		selector, err := labels.Parse(req.URL.Query().Get("labelSelector"))
		if err != nil {
			return nil, err
		}
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(v1alpha1.GroupVersion.String())
		a.mu.Lock()
		for _, o := range a.objects[resource] {
			if selector.Matches(labels.Set(o.GetLabels())) {
				list.Items = append(list.Items, *o.DeepCopy())
			}
		}
		a.mu.Unlock()
		table, err := toTable(columns, list.Items)
		if err != nil {
			return nil, err
		}
		table.APIVersion, table.Kind = "meta.k8s.io/v1", "Table"
		return reply(table)
	}
	return nil, fmt.Errorf("fakeAPI: unexpected %s %s", req.Method, req.URL)
}

// toTable is the Table of items with a Name column and the printer columns of a CRD, as
// the API server's table convertor for custom resources builds it (with the objects).
func toTable(columns []apiextensionsv1.CustomResourceColumnDefinition, items []unstructured.Unstructured) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name"}}}
	paths := make([]*jsonpath.JSONPath, len(columns))
	for i, c := range columns {
		table.ColumnDefinitions = append(table.ColumnDefinitions, metav1.TableColumnDefinition{Name: c.Name, Type: c.Type, Format: c.Format, Priority: c.Priority})
		paths[i] = jsonpath.New(c.Name).AllowMissingKeys(true)
		if err := paths[i].Parse("{" + c.JSONPath + "}"); err != nil {
			return nil, err
		}
	}
	for _, item := range items {
		cells := []any{item.GetName()}
		for i, c := range columns {
			results, err := paths[i].FindResults(item.Object)
			if err != nil || len(results) == 0 || len(results[0]) == 0 {
				cells = append(cells, nil)
				continue
			}
			v := results[0][0].Interface()
			if c.Type == "date" {
				ts, err := time.Parse(time.RFC3339, fmt.Sprint(v))
				if err != nil {
					return nil, err
				}
				v = duration.HumanDuration(time.Since(ts))
			}
			cells = append(cells, v)
		}
		raw, err := json.Marshal(item.Object)
		if err != nil {
			return nil, err
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Raw: raw}})
	}
	return table, nil
}

var created = metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))

// registryCluster is a Cluster CR as a member holds it.
func registryCluster(name string, local bool) *unstructured.Unstructured {
	typ, state := v1alpha1.ClusterTypePeer, "Ready"
	if local {
		typ = v1alpha1.ClusterTypeLocal
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Cluster",
		"metadata": map[string]any{"name": name, "creationTimestamp": created.UTC().Format(time.RFC3339)},
		"spec":     map[string]any{"clusterID": "id-" + name},
		"status": map[string]any{"type": string(typ), "state": state, "conditions": []any{
			map[string]any{"type": "ClustersSynced", "status": "True"},
		}},
	}}
}

// rule is a ResourceSyncRule of kind.
func rule(name, kind string, synced int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "ResourceSyncRule",
		"metadata": map[string]any{"name": name, "creationTimestamp": created.UTC().Format(time.RFC3339), "labels": map[string]any{"team": "x"}},
		"spec":     map[string]any{"groupVersionKind": map[string]any{"version": "v1", "kind": kind}},
		"status": map[string]any{"syncedObjects": synced, "conditions": []any{
			map[string]any{"type": "Ready", "status": "True"},
		}},
	}}
}

// registryResources is what the discovery of a cluster with the registry serves.
var registryResources = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "namespaces", Kind: "Namespace", Verbs: []string{"get", "list"}, ShortNames: []string{"ns"}}}},
	{GroupVersion: v1alpha1.GroupVersion.String(), APIResources: []metav1.APIResource{
		{Name: "clusters", SingularName: "cluster", Kind: "Cluster", Verbs: []string{"get", "list", "watch"}},
		{Name: "resourcesyncrules", SingularName: "resourcesyncrule", Kind: "ResourceSyncRule", Verbs: []string{"get", "list", "watch"}, ShortNames: []string{"rsr"}},
	}},
}

// addCluster adds context name to f: a cluster whose kube-system UID is id-<uid> and
// which holds objs (Clusters and ResourceSyncRules); without objs the registry is not
// installed there. It returns the cluster's HTTP side.
func addCluster(t *testing.T, f *kubefake.Factory, name, uid string, objs ...*unstructured.Unstructured) *fakeAPI {
	t.Helper()
	c := f.Add(name)
	api := &fakeAPI{uid: types.UID("id-" + uid), objects: map[string][]*unstructured.Unstructured{}}
	for _, o := range objs {
		resource := map[string]string{"Cluster": "clusters", "ResourceSyncRule": "resourcesyncrules"}[o.GetKind()]
		api.objects[resource] = append(api.objects[resource], o)
		if o.GetKind() == "Cluster" {
			// The fake dynamic client holds the typed objects of its scheme.
			var typed v1alpha1.Cluster
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &typed); err != nil {
				t.Fatal(err)
			}
			if err := f.AddDynamic(name, &typed); err != nil {
				t.Fatal(err)
			}
		}
	}
	cs, err := kubernetes.NewForConfigAndClient(&rest.Config{Host: kubefake.Host(name)}, &http.Client{Transport: api})
	if err != nil {
		t.Fatal(err)
	}
	c.Kubernetes = cs
	resources := registryResources
	if len(objs) == 0 {
		resources = registryResources[:1]
		c.Dynamic.PrependReactor("list", "clusters", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "clusters"}, "")
		})
	}
	c.Discovery = &discoveryfake.FakeDiscovery{Fake: &k8stesting.Fake{Resources: resources}}
	return api
}

// fakeGroup returns the contexts a and b of a group of two (a with two rules, b with
// one), c where the registry is not installed, and a2, which reaches the cluster of a.
func fakeGroup(t *testing.T) *kubefake.Factory {
	t.Helper()
	f := kubefake.New(nil)
	aObjs := []*unstructured.Unstructured{registryCluster("a", true), registryCluster("b", false), rule("secrets", "Secret", 3), rule("configmaps", "ConfigMap", 12)}
	addCluster(t, f, "a", "a", aObjs...)
	addCluster(t, f, "a2", "a", aObjs...)
	addCluster(t, f, "b", "b", registryCluster("a", false), registryCluster("b", true), rule("secrets", "Secret", 1))
	addCluster(t, f, "c", "c")
	f.Current = "a"
	return f
}

// runGetFake runs "kubectl registry get <args>" through cobra, as the plugin does, with f
// as the Factory, and returns what main would print and exit with.
func runGetFake(t *testing.T, f *kubefake.Factory, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	err := plugintest.RunVerb(t, NewCmdGet(f, streams), args...)
	if err != nil && err.Error() != "" {
		errOut.WriteString("error: " + err.Error() + "\n")
	}
	return out.String(), errOut.String(), cmdutil.ExitCode(err)
}

// TestRunFake runs get's Run against fake clusters: the contexts are named after their
// local Cluster, a context without the registry is left out, two contexts of one cluster
// are searched once, and the tables of every cluster are printed together.
func TestRunFake(t *testing.T) {
	const dup = "warning: context a2 reaches the same cluster as context a: searched once\n"
	tests := []struct {
		name       string
		args       []string
		golden     string
		wantErrOut string
		wantCode   int
		// modify, when set, changes the fake clusters.
		modify func(*kubefake.Factory)
	}{
		{name: "clusters", args: []string{"clusters"}, golden: "fake-clusters.txt", wantErrOut: dup},
		{name: "rules, wide, sorted", args: []string{"rsr", "-o", "wide", "--sort-by", ".status.syncedObjects"}, golden: "fake-rules-wide.txt", wantErrOut: dup},
		{name: "rules of b", args: []string{"resourcesyncrules", "--clusters", "b", "--no-headers"}, golden: "fake-rules-b.txt"},
		{name: "rule by name, json", args: []string{"rsr", "secrets", "--contexts", "a,b", "-o", "json"}, golden: "fake-rules-secrets.json"},
		{name: "label selector, limit", args: []string{"rsr", "-l", "team=x", "--limit", "1", "--contexts", "b,a"}, golden: "fake-rules-limit.txt"},
		{name: "context without the registry", args: []string{"clusters", "--context", "c"},
			wantErrOut: "warning: context c: the cluster registry is not installed there; showing it as cluster \"c\"\n" +
				"error: the server doesn't have a resource type \"clusters\"\n",
			wantCode: 2},
		// Like kubectl, no namespace is named for a kind that is not namespaced.
		{name: "unknown name", args: []string{"rsr", "nosuch", "--contexts", "a,b"},
			wantErrOut: "No resources found\nerror: rsr \"nosuch\" not found in any cluster\n", wantCode: 2},
		{name: "unreachable cluster", args: []string{"clusters", "--contexts", "a,b"}, golden: "fake-clusters-a.txt",
			modify:     func(f *kubefake.Factory) { f.Cluster("b").Err = errors.New("dial tcp: connection refused") },
			wantErrOut: "error: cluster b: dial tcp: connection refused\n", wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeGroup(t)
			if tt.modify != nil {
				tt.modify(f)
			}
			stdout, stderr, code := runGetFake(t, f, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if diff := cmp.Diff(tt.wantErrOut, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if tt.golden != "" {
				golden(t, tt.golden, normalise(stdout))
			} else if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

// TestPrintNoResources: like kubectl, the namespace is named only when the kinds listed
// are namespaced and every cluster listed the same namespace.
func TestPrintNoResources(t *testing.T) {
	namespaced := &resourceTable{mapping: &meta.RESTMapping{Scope: meta.RESTScopeNamespace}}
	clusterScoped := &resourceTable{mapping: &meta.RESTMapping{Scope: meta.RESTScopeRoot}}
	tests := []struct {
		name    string
		all     bool
		targets []target
		results []*clusterResult
		want    string
	}{
		{name: "namespaced kind", targets: []target{{context: "a", namespace: "team"}, {context: "b", namespace: "team"}},
			results: []*clusterResult{{tables: []*resourceTable{namespaced}}, {tables: []*resourceTable{namespaced}}},
			want:    "No resources found in team namespace.\n"},
		{name: "cluster-scoped kind", targets: []target{{context: "a", namespace: "default"}},
			results: []*clusterResult{{tables: []*resourceTable{clusterScoped}}},
			want:    "No resources found\n"},
		{name: "a cluster-scoped and a namespaced kind", targets: []target{{context: "a", namespace: "default"}},
			results: []*clusterResult{{tables: []*resourceTable{clusterScoped, namespaced}}},
			want:    "No resources found in default namespace.\n"},
		{name: "kind not served", targets: []target{{context: "a", namespace: "default"}},
			results: []*clusterResult{{tables: []*resourceTable{nil}}},
			want:    "No resources found\n"},
		{name: "clusters in different namespaces", targets: []target{{context: "a", namespace: "x"}, {context: "b", namespace: "y"}},
			results: []*clusterResult{{tables: []*resourceTable{namespaced}}, {tables: []*resourceTable{namespaced}}},
			want:    "No resources found\n"},
		{name: "skipped and failed clusters do not count", targets: []target{{context: "a", namespace: "x"}, {context: "b", namespace: "y"}, {context: "c", namespace: "z"}},
			results: []*clusterResult{{tables: []*resourceTable{namespaced}}, {skip: true, tables: []*resourceTable{namespaced}}, {err: errors.New("down"), tables: []*resourceTable{namespaced}}},
			want:    "No resources found in x namespace.\n"},
		{name: "all namespaces", all: true, targets: []target{{context: "a", namespace: "x"}},
			results: []*clusterResult{{tables: []*resourceTable{namespaced}}},
			want:    "No resources found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errOut bytes.Buffer
			o := &Options{AllNamespaces: tt.all, targets: tt.targets}
			o.ErrOut = &errOut
			o.printNoResources(tt.results)
			if diff := cmp.Diff(tt.want, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWatchFake runs "get clusters -w" against in-memory clusters: the watch is opened
// through the Factory's dynamic client of each context (a client for watching), a
// change on a cluster prints the tables again, and cancelling ends the watch cleanly.
func TestWatchFake(t *testing.T) {
	f := kubefake.New(nil)
	addCluster(t, f, "a", "a", registryCluster("a", true), registryCluster("b", false))
	apiB := addCluster(t, f, "b", "b", registryCluster("a", false), registryCluster("b", true))
	f.Current = "a"

	run := plugintest.Command{New: []plugintest.NewCmd{NewCmdGet}, Factory: f}.Start(t, "get", "clusters", "--contexts", "a,b", "--no-headers", "-w")
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(run.Out.String()); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the watch did not print %s; stdout:\n%s\nstderr:\n%s", what, run.Out, run.ErrOut)
			}
		}
	}
	waitFor("the first frame", func(out string) bool { return strings.Count(out, "id-") == 4 })
	// The watches were opened before the first frame, each with the last client built
	// for its cluster.
	for _, name := range []string{"a", "b"} {
		if got := f.Cluster(name).Options; !got.Watch || got.Verb != "get" {
			t.Errorf("the last client of %s was built with %+v, want a watch client of get", name, got)
		}
	}

	// b's peer a fails: the copy of its Cluster on b changes.
	failed := registryCluster("a", false)
	_ = unstructured.SetNestedField(failed.Object, "Failed", "status", "state")
	apiB.set("clusters", failed, registryCluster("b", true))
	var typed v1alpha1.Cluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(failed.Object, &typed); err != nil {
		t.Fatal(err)
	}
	if err := f.Cluster("b").Dynamic.Tracker().Update(v1alpha1.GroupVersion.WithResource("clusters"), &typed, ""); err != nil {
		t.Fatal(err)
	}
	waitFor("the change", func(out string) bool { return strings.Contains(out, "Failed") })

	if err := run.Stop(t, 5*time.Second); err != nil {
		t.Errorf("the watch ended with %v, want nil", err)
	}
	frames := strings.Split(strings.TrimSpace(run.Out.String()), "\n\n")
	if len(frames) != 2 {
		t.Errorf("%d frames printed, want 2:\n%s", len(frames), run.Out)
	}
	if run.ErrOut.Len() != 0 {
		t.Errorf("stderr: %s", run.ErrOut)
	}
}
