package rules

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCompileReportsEveryProblem(t *testing.T) {
	rsr := decodeRule(t, spec(`  groupVersionKind: {group: example.com}
  clusterFeatureMatch:
  - featureName: ok
  - matchExpressions: [{key: tier, operator: Near, values: [a]}]
  rules:
  - match:
    - labels: [{matchLabels: {app: web}}, {matchExpressions: [{key: app, operator: In}]}]
    - annotations:
      - matchAnnotations: {"bad key!": x}
        matchExpressions:
        - {key: a, operator: In}
        - {key: b, operator: Exists, values: [x]}
        - {key: c, operator: Like, values: [x]}
      content:
      - {key: "spec..replicas", value: 1}
      - {key: "{.spec.containers[}", value: x}
      - {key: "spec.ok", value: 1}
    mutations:
      groupVersionKind: {group: example.com, version: "", kind: ""}
      labels: {add: {"bad key!": ok, good: "bad value!"}}
      annotations: {add: {"Bad/Key/X": v}}
      namespace: {addSuffix: _Shard}
      overrides:
      - {path: data.ok, value: "{{ .Object.metadata.name }}"}
      - {type: merge, path: data.x}
      - {path: "spec.containers[", value: x}
      - {path: metadata.name, value: x}
      - {path: /metadata/namespace, type: remove}
      - {path: data.x, value: "{{ .Object.metadata.name "}
      - {path: data.x, value: "{{ nosuchfunc }}"}
      - {path: data.x, value: '{{define "r"}}{{template "r"}}{{end}}{{template "r"}}'}
      - {path: data.x, value: '{{template "missing"}}'}
      - {path: data.x, value: "a: [b", parseValue: true}
      - {path: data.x, type: remove, value: "{{ ignored"}
`))
	_, err := Compile(rsr)
	var ie *InvalidRuleError
	if !errors.As(err, &ie) {
		t.Fatalf("Compile error = %v, want an *InvalidRuleError", err)
	}
	if ie.Rule != "test" {
		t.Errorf("Rule = %q", ie.Rule)
	}
	m := "spec.rules[0].mutations."
	want := []Problem{
		{"spec.groupVersionKind.version", "must not be empty"},
		{"spec.groupVersionKind.kind", "must not be empty"},
		{"spec.clusterFeatureMatch[1]", `"Near" is not a valid label selector operator`},
		{"spec.rules[0].match[0].labels[1]", "for 'in', 'notin' operators, values set can't be empty"},
		{"spec.rules[0].match[1].annotations[0].matchAnnotations[bad key!]", "invalid annotation key"},
		{"spec.rules[0].match[1].annotations[0].matchExpressions[0].values", "must be non-empty for operator In"},
		{"spec.rules[0].match[1].annotations[0].matchExpressions[1].values", "must be empty for operator Exists"},
		{"spec.rules[0].match[1].annotations[0].matchExpressions[2].operator", `unknown operator "Like"`},
		{"spec.rules[0].match[1].content[0].key", `invalid path "spec..replicas": empty key at offset 5`},
		{"spec.rules[0].match[1].content[1].key", `invalid path "{.spec.containers[}"`},
		{m + "groupVersionKind.version", "must not be empty"},
		{m + "groupVersionKind.kind", "must not be empty"},
		{m + "labels.add[bad key!]", "invalid label key"},
		{m + "labels.add[good]", `invalid label value "bad value!"`},
		{m + "annotations.add[Bad/Key/X]", "invalid annotation key"},
		{m + "namespace.addSuffix", `"_Shard" cannot be part of a namespace name`},
		{m + "overrides[1].type", `unknown type "merge": use replace or remove`},
		{m + "overrides[2].path", `invalid path "spec.containers[": "[" at offset 15 is not closed`},
		{m + "overrides[3].path", "overrides cannot change metadata.name"},
		{m + "overrides[4].path", "overrides cannot change metadata.namespace"},
		{m + "overrides[5].value", "invalid template: template: value:1: unclosed action"},
		{m + "overrides[6].value", `function "nosuchfunc" not defined`},
		{m + "overrides[7].value", `template "r" calls itself: recursive templates are not allowed`},
		{m + "overrides[8].value", `template "missing" is not defined`},
		{m + "overrides[9].value", "value is not valid YAML"},
	}
	if len(ie.Problems) != len(want) {
		t.Errorf("got %d problems, want %d", len(ie.Problems), len(want))
	}
	for i := range max(len(want), len(ie.Problems)) {
		switch {
		case i >= len(ie.Problems):
			t.Errorf("missing problem %s: %s", want[i].Field, want[i].Message)
		case i >= len(want):
			t.Errorf("unexpected problem %s: %s", ie.Problems[i].Field, ie.Problems[i].Message)
		case ie.Problems[i].Field != want[i].Field || !strings.Contains(ie.Problems[i].Message, want[i].Message):
			t.Errorf("problem %d = %s: %s\nwant %s: ...%s...", i, ie.Problems[i].Field, ie.Problems[i].Message, want[i].Field, want[i].Message)
		}
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, `ResourceSyncRule "test" is invalid: spec.groupVersionKind.version: must not be empty; spec.groupVersionKind.kind: must not be empty; `) {
		t.Errorf("Error() = %s", msg)
	}
}

func TestCompileNil(t *testing.T) {
	var ie *InvalidRuleError
	if _, err := Compile(nil); !errors.As(err, &ie) {
		t.Fatalf("Compile(nil) = %v", err)
	}
}

func TestCompileDoesNotKeepTheInput(t *testing.T) {
	rsr := decodeRule(t, spec(`  groupVersionKind: {version: v1, kind: Secret}
  rules: [{mutations: {labels: {add: {a: "1"}}}}]
`))
	r, err := Compile(rsr)
	if err != nil {
		t.Fatal(err)
	}
	rsr.Spec.Rules[0].Mutations.Labels.Add["a"] = "changed"
	m, _ := r.Match(object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n"))
	if m.AddLabels["a"] != "1" {
		t.Errorf("the rule follows changes of its input: a = %q", m.AddLabels["a"])
	}
}

func TestTargetGVKs(t *testing.T) {
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	copyKind := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Copy"}
	tests := []struct {
		name  string
		rules string
		want  []schema.GroupVersionKind
	}{
		{name: "no rewrite", rules: "[{}]", want: []schema.GroupVersionKind{secret}},
		{name: "no rules", rules: "[]", want: []schema.GroupVersionKind{secret}},
		{name: "every rule rewrites", rules: "[{mutations: {groupVersionKind: {group: example.com, version: v1, kind: Copy}}}, {mutations: {groupVersionKind: {version: v1, kind: ConfigMap}}}]",
			want: []schema.GroupVersionKind{cm, copyKind}},
		{name: "some rules rewrite", rules: "[{mutations: {groupVersionKind: {group: example.com, version: v1, kind: Copy}}}, {}, {mutations: {groupVersionKind: {group: example.com, version: v1, kind: Copy}}}]",
			want: []schema.GroupVersionKind{secret, copyKind}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := compileYAML(t, spec("  groupVersionKind: {version: v1, kind: Secret}\n  rules: "+tc.rules+"\n"))
			if diff := cmp.Diff(tc.want, r.TargetGVKs); diff != "" {
				t.Errorf("TargetGVKs (-want +got):\n%s", diff)
			}
			if r.GVK != secret || r.Name != "test" {
				t.Errorf("GVK, Name = %v, %q", r.GVK, r.Name)
			}
		})
	}
}

// TestCompileIgnoreFields: spec.ignoreFields are field paths ([*] allowed) that never
// reach the copy's identity or the registry's marks.
func TestCompileIgnoreFields(t *testing.T) {
	rsr := decodeRule(t, spec(`  groupVersionKind: {group: apps, version: v1, kind: Deployment}
  rules: [{}]
  ignoreFields:
  - spec.replicas
  - spec.template.spec.containers[name=istio-proxy]
  - spec.template.spec.containers[*].resources
  - metadata.annotations.sidecar\.istio\.io/status
`))
	r, err := Compile(rsr)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	var got []string
	for _, p := range r.IgnoreFields {
		got = append(got, p.String())
	}
	want := []string{"spec.replicas", "spec.template.spec.containers[name=istio-proxy]", "spec.template.spec.containers[*].resources", `metadata.annotations.sidecar\.istio\.io/status`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("IgnoreFields (-want +got):\n%s", diff)
	}

	bad := decodeRule(t, spec(`  groupVersionKind: {version: v1, kind: ConfigMap}
  rules: [{}]
  ignoreFields: ["spec..x", metadata.name, kind, "metadata.labels.cluster-registry\\.k8s\\.cisco\\.com/resource-owner-cluster-id", "[0]"]
`))
	_, err = Compile(bad)
	var ie *InvalidRuleError
	if !errors.As(err, &ie) {
		t.Fatalf("Compile error = %v, want an *InvalidRuleError", err)
	}
	var fields []string
	for _, p := range ie.Problems {
		fields = append(fields, p.Field)
	}
	wantFields := []string{"spec.ignoreFields[0]", "spec.ignoreFields[1]", "spec.ignoreFields[2]", "spec.ignoreFields[3]", "spec.ignoreFields[4]"}
	if diff := cmp.Diff(wantFields, fields); diff != "" {
		t.Errorf("problems (-want +got):\n%s\n%v", diff, ie.Problems)
	}
}

// TestFieldPathWildcardOnlyInFieldPaths: [*] stays refused in overrides and content keys.
func TestFieldPathWildcardOnlyInFieldPaths(t *testing.T) {
	if _, err := parsePath("spec.ports[*].port"); err == nil {
		t.Error("parsePath accepted [*]")
	}
	if _, err := ParseFieldPath("spec.ports[*].port"); err != nil {
		t.Errorf("ParseFieldPath: %v", err)
	}
}

// TestBounds: a rule from another member's API server need not have passed this
// cluster's CRD: its overrides are capped when compiled, and what the overrides of one
// copy render is capped in all (40 overrides of a megabyte each would build a 40 MB copy).
func TestBounds(t *testing.T) {
	var b strings.Builder
	for i := 0; i <= MaxOverrides; i++ {
		b.WriteString("      - {path: data.x, value: x}\n")
	}
	_, err := Compile(decodeRule(t, spec("  groupVersionKind: {version: v1, kind: ConfigMap}\n  rules:\n  - mutations:\n      overrides:\n"+b.String())))
	var ie *InvalidRuleError
	if !errors.As(err, &ie) || !strings.Contains(ie.Error(), "at most 64") {
		t.Errorf("Compile of %d overrides: %v, want an InvalidRuleError naming the cap", MaxOverrides+1, err)
	}

	b.Reset()
	for i := 0; i < 40; i++ {
		b.WriteString(`      - {path: data.k` + strconv.Itoa(i) + `, value: '{{ printf "%01000000d" 0 }}'}` + "\n")
	}
	r, err := Compile(decodeRule(t, spec("  groupVersionKind: {version: v1, kind: ConfigMap}\n  rules:\n  - mutations:\n      overrides:\n"+b.String())))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "n"}}}
	mut, ok := r.Match(obj)
	if !ok {
		t.Fatal("no match")
	}
	if _, err := mut.Apply(obj, TemplateContext{}); !errors.Is(err, ErrCopyRenderedTooLarge) {
		t.Errorf("Apply of 40 one-megabyte overrides: %v, want ErrCopyRenderedTooLarge", err)
	}
}
