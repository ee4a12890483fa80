package rules

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// FuzzApply compiles a rule, matches an object and copies it: nothing may panic, Apply
// must be deterministic and leave its input alone, and the source of a copy must be
// among the SourceKeys of the copy's key.
func FuzzApply(f *testing.F) {
	seeds := []struct{ rule, obj string }{
		{`
spec:
  groupVersionKind: {kind: Secret, version: v1}
  rules:
  - match:
    - objectKey: {name: test-secret, namespace: cluster-registry}
`, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"test-secret","namespace":"cluster-registry","uid":"x","resourceVersion":"1"},"data":{}}`},
		{`
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  clusterFeatureMatch: [{featureName: f, matchLabels: {a: b}}]
  rules:
  - match:
    - labels: [{matchExpressions: [{key: app, operator: In, values: [web]}]}]
      annotations: [{matchAnnotations: {note: x}, matchExpressions: [{key: y, operator: DoesNotExist}]}]
      content: [{key: "data.mode", value: fast}, {key: "{.data.n}", value: 3}, {key: "{.list[*].a}", value: "1"}]
    mutations:
      labels: {add: {synced: "true"}, remove: [app]}
      annotations: {add: {a: b}, remove: [note]}
      groupVersionKind: {group: example.com, version: v1, kind: Copy}
      syncStatus: true
`, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"apps","labels":{"app":"web"},"annotations":{"note":"x"}},"data":{"mode":"fast","n":3},"list":[{"a":1}],"status":{"x":1}}`},
		{`
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - mutations:
      overrides:
      - {path: data.origin, value: "{{ .Cluster.metadata.name }}/{{ .Object.metadata.name | upper }}"}
      - {path: "spec.items[name=a].v", value: "{{ toJSON .Object.data }}"}
      - {path: "spec.items[0]", value: "{a: [1, 2], b: {{ .Object.data.n }}}", parseValue: true}
      - {path: 'metadata.annotations.example\.com/x', value: "{{ range $k, $v := .Object.data }}{{ $k }}={{ $v }};{{ end }}"}
      - {path: "/data/a~1b", value: x}
      - {type: remove, path: "spec.items[name=b]"}
      - {type: remove, path: "{.data.mode}"}
`, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"apps"},"data":{"mode":"fast","n":3},"spec":{"items":[{"name":"a"},{"name":"b"}]}}`},
		{`
spec:
  groupVersionKind: {group: example.com, version: v1, kind: Tenant}
  rules:
  - match: [{namespaces: [tenants-eu1]}]
    mutations:
      name: {stripSuffix: -eu1, addPrefix: shard-}
      namespace: {stripSuffix: -eu1, addSuffix: -copy}
  - mutations:
      name: {stripPrefix: a}
`, `{"apiVersion":"example.com/v1","kind":"Tenant","metadata":{"name":"acme-eu1","namespace":"tenants-eu1"},"spec":{"plan":"gold"}}`},
		{`
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - mutations:
      overrides:
      - {path: data.x, value: '{{ define "t" }}{{ range . }}{{ . }}{{ end }}{{ end }}{{ template "t" .Object.data }}{{ printf "%05d" 1 }}'}
`, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web"},"data":{"a":"1","b":"2"}}`},
		{`{"spec":{"groupVersionKind":{"version":"v1","kind":"X"},"rules":[{}]}}`, `{"metadata":{"name":"n","labels":{"a":1}}}`},
	}
	for _, s := range seeds {
		f.Add(s.rule, s.obj)
	}
	features := []v1alpha1.ClusterFeature{{
		ObjectMeta: metav1.ObjectMeta{Name: "f", Labels: map[string]string{"a": "b"}},
		Spec:       v1alpha1.ClusterFeatureSpec{FeatureName: "f"},
	}}
	tc := TemplateContext{
		Cluster:      map[string]any{"metadata": map[string]any{"name": "peer"}, "spec": map[string]any{"clusterID": "peer-id"}},
		LocalCluster: map[string]any{"metadata": map[string]any{"name": "local"}},
	}
	f.Fuzz(func(t *testing.T, ruleYAML, objJSON string) {
		if len(ruleYAML) > 32<<10 || len(objJSON) > 32<<10 {
			return
		}
		var rsr v1alpha1.ResourceSyncRule
		if err := yaml.Unmarshal([]byte(ruleYAML), &rsr); err != nil {
			return
		}
		r, err := Compile(&rsr)
		if err != nil {
			var ie *InvalidRuleError
			if !errors.As(err, &ie) || len(ie.Problems) == 0 {
				t.Fatalf("Compile error %v is not an *InvalidRuleError with problems", err)
			}
			return
		}
		var content map[string]any
		if err := utiljson.Unmarshal([]byte(objJSON), &content); err != nil || content == nil {
			return
		}
		obj := &unstructured.Unstructured{Object: content}
		before := runtime.DeepCopyJSON(content)

		r.Sources(features)
		r.SourceNamespaces()
		m, matched := r.Match(obj)
		source := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		target, synced := m.TargetKey(source)
		if matched && synced && !slices.Contains(r.SourceKeys(target), source) {
			t.Fatalf("%v maps to %v, whose SourceKeys %v miss it", source, target, r.SourceKeys(target))
		}

		out1, err1 := m.Apply(obj, tc)
		out2, err2 := m.Apply(obj, tc)
		if !cmp.Equal(before, content) {
			t.Fatalf("Apply changed its input:\n%s", cmp.Diff(before, content))
		}
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("Apply is not deterministic: %v, %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		if !cmp.Equal(out1.Object, out2.Object) {
			t.Fatalf("Apply is not deterministic:\n%s", cmp.Diff(out1.Object, out2.Object))
		}
		runtime.DeepCopyJSON(out1.Object) // Panics on values unstructured content cannot hold.
		if _, err := json.Marshal(out1.Object); err != nil {
			t.Fatalf("the copy is not JSON: %v", err)
		}
		if !synced || out1.GetName() != target.Name || out1.GetNamespace() != target.Namespace {
			t.Fatalf("the copy is %s/%s, TargetKey %v, %v", out1.GetNamespace(), out1.GetName(), target, synced)
		}
	})
}

// FuzzPath parses paths and uses them on a document: nothing may panic, and a parsed
// path spelled back by formatPath parses to the same steps.
func FuzzPath(f *testing.F) {
	for _, p := range []string{
		"data.mode", ".data.mode", "{.spec.containers[0].image}", `metadata.annotations.example\.com/x`,
		"spec.containers[name=app].image", `a[?(@.name=="x")]`, "/spec/ports/0/name", "a['b.c']", "a.0.b",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		steps, err := parsePath(path)
		if err != nil {
			return
		}
		if len(steps) == 0 {
			t.Fatal("no steps")
		}
		again, err := parsePath(formatPath(steps))
		if err != nil || !cmp.Equal(again, steps, cmp.AllowUnexported(step{})) {
			t.Fatalf("%q: formatPath gives %q, which parses to %v, %v", path, formatPath(steps), again, err)
		}
		doc := map[string]any{"data": map[string]any{"mode": "x"}, "spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "i"}, "scalar", nil},
		}}
		getPath(doc, steps)
		_ = setPath(doc, steps, "v")
		removePath(doc, steps)
		runtime.DeepCopyJSON(doc)
	})
}
