package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite golden files")

const goldenDir = "../../testdata/rules"

// goldenCase is an input file of testdata/rules: a rule, a source object and the
// Clusters the templates see.
type goldenCase struct {
	Rule         json.RawMessage `json:"rule"`
	Object       json.RawMessage `json:"object"`
	Cluster      json.RawMessage `json:"cluster,omitempty"`
	LocalCluster json.RawMessage `json:"localCluster,omitempty"`
}

// goldenResult is what a golden file records.
type goldenResult struct {
	Matched   bool           `json:"matched"`
	SyncRules []int          `json:"syncRules,omitempty"`
	TargetGVK string         `json:"targetGVK,omitempty"`
	TargetKey string         `json:"targetKey,omitempty"`
	Error     string         `json:"error,omitempty"`
	Copy      map[string]any `json:"copy,omitempty"`
}

func decodeJSONObject(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func loadGoldenCase(t *testing.T, path string) (*Rule, *unstructured.Unstructured, TemplateContext) {
	t.Helper()
	j, err := yaml.YAMLToJSONStrict([]byte(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	var gc goldenCase
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&gc); err != nil {
		t.Fatal(err)
	}
	var rsr v1alpha1.ResourceSyncRule
	if err := yaml.UnmarshalStrict(gc.Rule, &rsr); err != nil {
		t.Fatalf("rule: %v", err)
	}
	r, err := Compile(&rsr)
	if err != nil {
		t.Fatal(err)
	}
	tc := TemplateContext{Cluster: decodeJSONObject(t, gc.Cluster), LocalCluster: decodeJSONObject(t, gc.LocalCluster)}
	return r, &unstructured.Unstructured{Object: decodeJSONObject(t, gc.Object)}, tc
}

// run matches and copies obj as the engine does.
func run(r *Rule, obj *unstructured.Unstructured, tc TemplateContext) goldenResult {
	m, ok := r.Match(obj)
	if !ok {
		return goldenResult{}
	}
	res := goldenResult{Matched: true, SyncRules: m.SyncRules, TargetGVK: GVKString(m.TargetGVK(r.GVK))}
	if key, synced := m.TargetKey(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}); synced {
		res.TargetKey = key.String()
		if key.Namespace == "" {
			res.TargetKey = key.Name
		}
	} else {
		res.TargetKey = "(not synced)"
	}
	out, err := m.Apply(obj, tc)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Copy = out.Object
	return res
}

func TestApplyGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden.yaml") {
			continue
		}
		n++
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			r, obj, tc := loadGoldenCase(t, in)
			before := obj.DeepCopy()
			beforeTC := runtime.DeepCopyJSON(map[string]any{"c": tc.Cluster, "l": tc.LocalCluster})

			got := run(r, obj, tc)

			// Apply never modifies its inputs, and gives the same copy every time.
			if diff := cmp.Diff(before.Object, obj.Object); diff != "" {
				t.Errorf("the source object changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(beforeTC, map[string]any{"c": tc.Cluster, "l": tc.LocalCluster}); diff != "" {
				t.Errorf("the template context changed (-before +after):\n%s", diff)
			}
			if again := run(r, obj, tc); !cmp.Equal(got, again) {
				t.Errorf("a second run differs:\n%s", cmp.Diff(got, again))
			}
			if got.Copy != nil {
				// The copy shares nothing with the source.
				mutateEverything(got.Copy)
				if diff := cmp.Diff(before.Object, obj.Object); diff != "" {
					t.Errorf("the copy aliases the source (-before +after):\n%s", diff)
				}
				got = run(r, obj, tc)
			}

			out, err := yaml.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			out = append([]byte("# Match, TargetKey and Apply of "+filepath.Base(in)+"; go test ./reconciler/rules -run TestApplyGolden -update rewrites it.\n"), out...)
			golden := filepath.Join(goldenDir, name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(out)); diff != "" {
				t.Errorf("%s differs (-want +got):\n%s", golden, diff)
			}
		})
	}
	if n < 10 {
		t.Errorf("only %d golden cases in %s", n, goldenDir)
	}
}

// TestGoldenFilesHaveInputs keeps testdata/rules free of stale golden files.
func TestGoldenFilesHaveInputs(t *testing.T) {
	goldens, _ := filepath.Glob(filepath.Join(goldenDir, "*.golden.yaml"))
	for _, g := range goldens {
		if _, err := os.Stat(strings.TrimSuffix(g, ".golden.yaml") + ".yaml"); err != nil {
			t.Errorf("%s has no input: %v", g, err)
		}
	}
}

// mutateEverything changes every map and list under v in place.
func mutateEverything(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			mutateEverything(e)
			x[k+"-mutated"] = "x"
		}
	case []any:
		for i, e := range x {
			mutateEverything(e)
			x[i] = "mutated"
		}
	}
}

func TestApplyErrors(t *testing.T) {
	source := `
apiVersion: v1
kind: ConfigMap
metadata: {name: app-eu1, namespace: tenant-eu1}
data: {mode: fast, list: "[1, 2]"}
`
	tests := []struct {
		name      string
		mutations string
		obj       string
		tc        *TemplateContext
		wantErr   string
		wantIs    error
	}{
		{name: "name lacks the suffix", mutations: "{name: {stripSuffix: -us1}}", wantIs: ErrNotSynced,
			wantErr: "tenant-eu1/app-eu1: object is not synced"},
		{name: "renamed name is invalid", mutations: "{name: {addSuffix: _Copy}}", wantIs: ErrInvalidName,
			wantErr: `invalid rewritten name: name "app-eu1_Copy" (from "app-eu1"): a lowercase RFC 1123 subdomain`},
		{name: "renamed name is too long", mutations: "{name: {addSuffix: -" + strings.Repeat("x", 250) + "}}", wantIs: ErrInvalidName,
			wantErr: "must be no more than 253 characters"},
		{name: "renamed namespace is too long", mutations: "{namespace: {addSuffix: -" + strings.Repeat("x", 60) + "}}", wantIs: ErrInvalidName,
			wantErr: `namespace "tenant-eu1-xxx`},
		{name: "a loose name may take a colon", mutations: "{name: {addSuffix: /x}}", obj: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"system:app\"}\n",
			wantIs: ErrInvalidName, wantErr: `may not contain '/'`},
		{name: "missing key", mutations: `{overrides: [{path: data.x, value: "{{ .Object.data.nope }}"}]}`,
			wantErr: `spec.rules[0].mutations.overrides[0] (replace "data.x"): template: value:1:10: executing "value" at <.Object.data.nope>: map has no entry for key "nope"`},
		{name: "no source cluster", mutations: `{overrides: [{path: data.x, value: "{{ .Cluster.metadata.name }}"}]}`,
			wantErr: "(the source cluster's Cluster is not known)"},
		{name: "index out of range", mutations: `{overrides: [{path: "data.mode", value: x}, {path: "spec.list[3]", value: x}]}`,
			obj:     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nspec: {list: [1]}\n",
			wantErr: `spec.rules[0].mutations.overrides[1] (replace "spec.list[3]"): index 3 is out of range: spec.list has 1 elements`},
		{name: "rendered YAML is invalid", mutations: `{overrides: [{path: data.x, value: "{{ .Object.data.mode }}: [", parseValue: true}]}`,
			wantErr: `spec.rules[0].mutations.overrides[0] (replace "data.x"): value is not valid YAML`},
		{name: "huge output", mutations: `{overrides: [{path: data.x, value: "{{ printf \"%0999999d\" 1 }}{{ printf \"%0999999d\" 1 }}"}]}`,
			wantIs: ErrRenderedTooLarge},
		{name: "metadata is not an object", mutations: "{}", obj: "apiVersion: v1\nkind: ConfigMap\nmetadata: [x]\n",
			wantErr: "metadata is a list, not an object"},
		{name: "labels are not an object", mutations: "{}", obj: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: x}\n",
			wantErr: "metadata.labels is a string, not an object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := compileYAML(t, spec("  groupVersionKind: {version: v1, kind: ConfigMap}\n  rules: [{mutations: "+tc.mutations+"}]\n"))
			text := tc.obj
			if text == "" {
				text = source
			}
			obj := object(t, text)
			m, ok := r.Match(obj)
			if !ok {
				t.Fatal("no match")
			}
			ctx := TemplateContext{}
			if tc.tc != nil {
				ctx = *tc.tc
			}
			_, err := m.Apply(obj, ctx)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error = %v, want %v", err, tc.wantIs)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %v\nwant it to contain %q", err, tc.wantErr)
			}
		})
	}
	var zero Mutation
	if _, err := zero.Apply(nil, TemplateContext{}); err == nil {
		t.Error("Apply(nil) did not fail")
	}
}

func TestApplyLooseNames(t *testing.T) {
	r := compileYAML(t, spec("  groupVersionKind: {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole}\n  rules: [{mutations: {name: {addSuffix: \":copy\"}}}]\n"))
	obj := object(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: \"system:reader\"}\n")
	m, _ := r.Match(obj)
	out, err := m.Apply(obj, TemplateContext{})
	if err != nil {
		t.Fatal(err)
	}
	if out.GetName() != "system:reader:copy" {
		t.Errorf("name = %q", out.GetName())
	}
}

// TestApplyNormalizesGoTypes checks that objects built in Go (with int and []string)
// are copied as unstructured content instead of panicking.
func TestApplyNormalizesGoTypes(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x", "labels": map[string]string{"a": "b"}},
		"spec":     map[string]any{"n": 3, "f": float32(0.5), "s": []string{"a"}},
	}}
	out, err := Mutation{}.Apply(obj, TemplateContext{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"n": int64(3), "f": float64(0.5), "s": []any{"a"}},
	}
	if diff := cmp.Diff(want, out.Object); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	obj.Object["spec"] = map[string]any{"ch": make(chan int)}
	if _, err := (Mutation{}).Apply(obj, TemplateContext{}); err == nil || !strings.Contains(err.Error(), "unsupported value of type chan int") {
		t.Errorf("Apply of a channel = %v", err)
	}
}

func TestGVKString(t *testing.T) {
	for _, s := range []string{"/v1/Secret", "apps/v1/Deployment", "example.com/v1alpha1/Copy"} {
		gvk, err := ParseGVKString(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := GVKString(gvk); got != s {
			t.Errorf("GVKString(ParseGVKString(%q)) = %q", s, got)
		}
	}
	for _, s := range []string{"", "v1/Secret", "/v1/", "a/b/c/d"} {
		if _, err := ParseGVKString(s); err == nil {
			t.Errorf("ParseGVKString(%q) did not fail", s)
		}
	}
}
