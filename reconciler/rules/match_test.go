package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

const matchObject = `
apiVersion: v1
kind: Secret
metadata:
  name: web
  namespace: apps
  labels: {app: web, tier: frontend}
  annotations: {example.com/owner: team-a, note: hello world}
type: Opaque
spec:
  replicas: 3
  ratio: 0.5
  whole: 3.0
  enabled: true
  version: "3"
  nothing: null
  nested: {a: b}
  ports: [{name: http, port: 80}, {name: https, port: 443}]
  containers: [{name: app, image: "nginx:1"}, {name: sidecar, image: envoy}]
  dotted: {"a.b": c}
`

func TestMatch(t *testing.T) {
	tests := []struct {
		name  string
		rules string // the YAML of spec.rules, indented by two spaces
		obj   string // defaults to matchObject
		want  []int  // indexes of the matching SyncRules; nil: no match
	}{
		{name: "no match entries match everything", rules: `
  - {}`, want: []int{0}},
		{name: "an empty match entry matches everything", rules: `
  - match: [{}]`, want: []int{0}},
		{name: "no rules match nothing", rules: ` []`, want: nil},

		// objectKey
		{name: "objectKey name", rules: `
  - match: [{objectKey: {name: web}}]`, want: []int{0}},
		{name: "objectKey name differs", rules: `
  - match: [{objectKey: {name: api}}]`},
		{name: "objectKey namespace", rules: `
  - match: [{objectKey: {namespace: apps}}]`, want: []int{0}},
		{name: "objectKey namespace differs", rules: `
  - match: [{objectKey: {namespace: default}}]`},
		{name: "objectKey name and namespace", rules: `
  - match: [{objectKey: {name: web, namespace: apps}}]`, want: []int{0}},
		{name: "objectKey name right, namespace wrong", rules: `
  - match: [{objectKey: {name: web, namespace: default}}]`},

		// namespaces
		{name: "namespaces any equal", rules: `
  - match: [{namespaces: [default, apps]}]`, want: []int{0}},
		{name: "namespaces none equal", rules: `
  - match: [{namespaces: [default, kube-system]}]`},
		{name: "namespaces never match a cluster-scoped object", rules: `
  - match: [{namespaces: [""]}]`, obj: "apiVersion: v1\nkind: Secret\nmetadata: {name: web}\n"},

		// labels
		{name: "labels matchLabels", rules: `
  - match: [{labels: [{matchLabels: {app: web}}]}]`, want: []int{0}},
		{name: "labels matchLabels differ", rules: `
  - match: [{labels: [{matchLabels: {app: api}}]}]`},
		{name: "labels In", rules: `
  - match: [{labels: [{matchExpressions: [{key: tier, operator: In, values: [backend, frontend]}]}]}]`, want: []int{0}},
		{name: "labels NotIn", rules: `
  - match: [{labels: [{matchExpressions: [{key: tier, operator: NotIn, values: [frontend]}]}]}]`},
		{name: "labels Exists", rules: `
  - match: [{labels: [{matchExpressions: [{key: app, operator: Exists}]}]}]`, want: []int{0}},
		{name: "labels DoesNotExist", rules: `
  - match: [{labels: [{matchExpressions: [{key: app, operator: DoesNotExist}]}]}]`},
		{name: "labels matchLabels and expressions are ANDed", rules: `
  - match: [{labels: [{matchLabels: {app: web}, matchExpressions: [{key: tier, operator: In, values: [backend]}]}]}]`},
		{name: "label selectors are ORed", rules: `
  - match: [{labels: [{matchLabels: {app: api}}, {matchLabels: {tier: frontend}}]}]`, want: []int{0}},
		{name: "an empty label selector matches everything", rules: `
  - match: [{labels: [{}]}]`, want: []int{0}},

		// annotations
		{name: "matchAnnotations", rules: `
  - match: [{annotations: [{matchAnnotations: {example.com/owner: team-a, note: hello world}}]}]`, want: []int{0}},
		{name: "matchAnnotations value differs", rules: `
  - match: [{annotations: [{matchAnnotations: {example.com/owner: team-b}}]}]`},
		{name: "matchAnnotations key missing", rules: `
  - match: [{annotations: [{matchAnnotations: {missing: ""}}]}]`},
		{name: "annotation In", rules: `
  - match: [{annotations: [{matchExpressions: [{key: example.com/owner, operator: In, values: [team-a, team-b]}]}]}]`, want: []int{0}},
		{name: "annotation In on a missing key", rules: `
  - match: [{annotations: [{matchExpressions: [{key: missing, operator: In, values: [x]}]}]}]`},
		{name: "annotation NotIn", rules: `
  - match: [{annotations: [{matchExpressions: [{key: example.com/owner, operator: NotIn, values: [team-a]}]}]}]`},
		{name: "annotation NotIn holds on a missing key", rules: `
  - match: [{annotations: [{matchExpressions: [{key: missing, operator: NotIn, values: [x]}]}]}]`, want: []int{0}},
		{name: "annotation Exists", rules: `
  - match: [{annotations: [{matchExpressions: [{key: note, operator: Exists}]}]}]`, want: []int{0}},
		{name: "annotation DoesNotExist", rules: `
  - match: [{annotations: [{matchExpressions: [{key: note, operator: DoesNotExist}]}]}]`},
		{name: "annotation parts are ANDed", rules: `
  - match: [{annotations: [{matchAnnotations: {note: hello world}, matchExpressions: [{key: example.com/owner, operator: DoesNotExist}]}]}]`},
		{name: "annotation selectors are ORed", rules: `
  - match: [{annotations: [{matchAnnotations: {note: bye}}, {matchExpressions: [{key: note, operator: Exists}]}]}]`, want: []int{0}},

		// content
		{name: "content string", rules: `
  - match: [{content: [{key: type, value: Opaque}]}]`, want: []int{0}},
		{name: "content string differs", rules: `
  - match: [{content: [{key: type, value: kubernetes.io/tls}]}]`},
		{name: "content int equals a number", rules: `
  - match: [{content: [{key: spec.replicas, value: 3}]}]`, want: []int{0}},
		{name: "content int equals a whole float", rules: `
  - match: [{content: [{key: spec.whole, value: 3}]}]`, want: []int{0}},
		{name: "content int equals its decimal string", rules: `
  - match: [{content: [{key: spec.version, value: 3}]}]`, want: []int{0}},
		{name: "content int differs", rules: `
  - match: [{content: [{key: spec.replicas, value: 4}]}]`},
		{name: "content int never equals a boolean", rules: `
  - match: [{content: [{key: spec.enabled, value: 1}]}]`},
		{name: "content string equals a number", rules: `
  - match: [{content: [{key: spec.replicas, value: "3"}]}]`, want: []int{0}},
		{name: "content string 3.0 equals the number 3", rules: `
  - match: [{content: [{key: spec.replicas, value: "3.0"}]}]`, want: []int{0}},
		{name: "content string 03 is not a JSON number", rules: `
  - match: [{content: [{key: spec.replicas, value: "03"}]}]`},
		{name: "content string equals a float", rules: `
  - match: [{content: [{key: spec.ratio, value: "0.5"}]}]`, want: []int{0}},
		{name: "content string equals a boolean", rules: `
  - match: [{content: [{key: spec.enabled, value: "true"}]}]`, want: []int{0}},
		{name: "content string differs from a boolean", rules: `
  - match: [{content: [{key: spec.enabled, value: "True"}]}]`},
		{name: "content missing", rules: `
  - match: [{content: [{key: spec.missing, value: ""}]}]`},
		{name: "content null never matches", rules: `
  - match: [{content: [{key: spec.nothing, value: ""}]}]`},
		{name: "content object never matches", rules: `
  - match: [{content: [{key: spec.nested, value: "{\"a\":\"b\"}"}]}]`},
		{name: "content list index", rules: `
  - match: [{content: [{key: "spec.containers[1].image", value: envoy}]}]`, want: []int{0}},
		{name: "content list selector", rules: `
  - match: [{content: [{key: "spec.containers[name=app].image", value: "nginx:1"}]}]`, want: []int{0}},
		{name: "content list selector on a number", rules: `
  - match: [{content: [{key: "spec.ports[port=443].name", value: https}]}]`, want: []int{0}},
		{name: "content digits index a list (gjson)", rules: `
  - match: [{content: [{key: spec.ports.1.port, value: 443}]}]`, want: []int{0}},
		{name: "content braces", rules: `
  - match: [{content: [{key: "{.spec.ports[0].name}", value: http}]}]`, want: []int{0}},
		{name: "content JSONPath filter", rules: `
  - match: [{content: [{key: "{.spec.containers[?(@.name==\"sidecar\")].image}", value: envoy}]}]`, want: []int{0}},
		{name: "content kubectl JSONPath wildcard, any value", rules: `
  - match: [{content: [{key: "{.spec.containers[*].image}", value: envoy}]}]`, want: []int{0}},
		{name: "content kubectl JSONPath wildcard, no value", rules: `
  - match: [{content: [{key: "{.spec.containers[*].image}", value: redis}]}]`},
		{name: "content escaped dot", rules: `
  - match: [{content: [{key: 'spec.dotted.a\.b', value: c}]}]`, want: []int{0}},
		{name: "content quoted key", rules: `
  - match: [{content: [{key: "spec.dotted['a.b']", value: c}]}]`, want: []int{0}},
		{name: "content JSON pointer", rules: `
  - match: [{content: [{key: /metadata/annotations/example.com~1owner, value: team-a}]}]`, want: []int{0}},
		{name: "content entries are ANDed", rules: `
  - match: [{content: [{key: spec.replicas, value: 3}, {key: type, value: Other}]}]`},

		// combinations
		{name: "all parts hold", rules: `
  - match:
    - objectKey: {name: web}
      namespaces: [apps]
      labels: [{matchLabels: {app: web}}]
      annotations: [{matchAnnotations: {note: hello world}}]
      content: [{key: spec.replicas, value: 3}]`, want: []int{0}},
		{name: "one part fails", rules: `
  - match:
    - objectKey: {name: web}
      namespaces: [apps]
      labels: [{matchLabels: {app: web}}]
      annotations: [{matchAnnotations: {note: hello world}}]
      content: [{key: spec.replicas, value: 4}]`},
		{name: "match entries are ORed", rules: `
  - match: [{objectKey: {name: api}}, {labels: [{matchLabels: {app: web}}]}]`, want: []int{0}},
		{name: "every matching rule counts", rules: `
  - match: [{objectKey: {name: web}}]
  - match: [{objectKey: {name: api}}]
  - {}`, want: []int{0, 2}},
		{name: "another kind never matches", rules: `
  - {}`, obj: "apiVersion: apps/v1\nkind: Secret\nmetadata: {name: web, namespace: apps}\n"},
		{name: "another kind name never matches", rules: `
  - {}`, obj: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: apps}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := compileYAML(t, spec("  groupVersionKind: {version: v1, kind: Secret}\n  rules:"+tc.rules+"\n"))
			text := tc.obj
			if text == "" {
				text = matchObject
			}
			m, ok := r.Match(object(t, text))
			if ok != (tc.want != nil) {
				t.Fatalf("Match = %v, want %v", ok, tc.want != nil)
			}
			if diff := cmp.Diff(tc.want, m.SyncRules); diff != "" {
				t.Errorf("SyncRules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchMergesMutations(t *testing.T) {
	r := compileYAML(t, spec(`  groupVersionKind: {version: v1, kind: Secret}
  rules:
  - mutations:
      labels: {add: {a: "1", b: "1"}, remove: [x, "y"]}
      annotations: {add: {"n": "1"}, remove: [p]}
      overrides: [{path: data.one, value: "1"}]
      name: {addSuffix: -first}
  - match: [{objectKey: {name: nope}}]
    mutations:
      labels: {add: {a: "never"}}
      syncStatus: true
  - mutations:
      groupVersionKind: {group: example.com, version: v1, kind: Copy}
      labels: {add: {b: "2", c: "2"}, remove: ["y", z]}
      annotations: {add: {"n": "2"}, remove: [q, p]}
      overrides: [{path: data.two, type: remove}]
      syncStatus: true
      name: {addSuffix: -second}
      namespace: {addPrefix: ns-}
  - mutations:
      groupVersionKind: {group: example.com, version: v1, kind: Later}
      namespace: {addPrefix: later-}
`))
	m, ok := r.Match(object(t, matchObject))
	if !ok {
		t.Fatal("no match")
	}
	var paths []string
	for _, o := range m.Overrides {
		paths = append(paths, o.Field+" "+string(o.Type)+" "+o.Path)
	}
	m.Overrides = nil
	want := Mutation{
		SyncRules:         []int{0, 2, 3},
		SourceGVK:         r.GVK,
		GVK:               v1alpha1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Copy"}.Schema(),
		AddLabels:         map[string]string{"a": "1", "b": "2", "c": "2"},
		RemoveLabels:      []string{"x", "y", "z"},
		AddAnnotations:    map[string]string{"n": "2"},
		RemoveAnnotations: []string{"p", "q"},
		SyncStatus:        true,
		Name:              v1alpha1.NameMutations{AddSuffix: "-first"},
		Namespace:         v1alpha1.NameMutations{AddPrefix: "ns-"},
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("Mutation (-want +got):\n%s", diff)
	}
	wantPaths := []string{
		"spec.rules[0].mutations.overrides[0] replace data.one",
		"spec.rules[2].mutations.overrides[0] remove data.two",
	}
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Errorf("Overrides (-want +got):\n%s", diff)
	}

	// The merged maps are fresh: changing them does not change the rule.
	m.AddLabels["a"] = "changed"
	again, _ := r.Match(object(t, matchObject))
	if again.AddLabels["a"] != "1" {
		t.Errorf("a Mutation aliases the rule: AddLabels[a] = %q", again.AddLabels["a"])
	}
}

func TestSources(t *testing.T) {
	feature := func(name string, labels map[string]string) v1alpha1.ClusterFeature {
		return v1alpha1.ClusterFeature{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       v1alpha1.ClusterFeatureSpec{FeatureName: name},
		}
	}
	gold := feature("gold", map[string]string{"tier": "1"})
	silver := feature("silver", map[string]string{"tier": "2", "region": "eu"})
	tests := []struct {
		name     string
		match    string
		features []v1alpha1.ClusterFeature
		want     bool
	}{
		{name: "no entries: every peer", match: "", want: true},
		{name: "no entries, no features", match: "", features: nil, want: true},
		{name: "featureName present", match: "[{featureName: gold}]", features: []v1alpha1.ClusterFeature{silver, gold}, want: true},
		{name: "featureName absent", match: "[{featureName: gold}]", features: []v1alpha1.ClusterFeature{silver}},
		{name: "featureName, no features", match: "[{featureName: gold}]"},
		{name: "every entry must hold", match: "[{featureName: gold}, {featureName: silver}]", features: []v1alpha1.ClusterFeature{gold}},
		{name: "every entry holds", match: "[{featureName: gold}, {featureName: silver}]", features: []v1alpha1.ClusterFeature{gold, silver}, want: true},
		{name: "matchLabels", match: "[{matchLabels: {region: eu}}]", features: []v1alpha1.ClusterFeature{gold, silver}, want: true},
		{name: "matchLabels none", match: "[{matchLabels: {region: us}}]", features: []v1alpha1.ClusterFeature{gold, silver}},
		{name: "featureName and labels on the same feature", match: "[{featureName: gold, matchLabels: {region: eu}}]", features: []v1alpha1.ClusterFeature{gold, silver}},
		{name: "matchExpressions", match: "[{matchExpressions: [{key: tier, operator: In, values: ['2']}]}]", features: []v1alpha1.ClusterFeature{gold, silver}, want: true},
		{name: "an empty entry needs a feature", match: "[{}]"},
		{name: "an empty entry takes any feature", match: "[{}]", features: []v1alpha1.ClusterFeature{gold}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := "  groupVersionKind: {version: v1, kind: Secret}\n  rules: [{}]\n"
			if tc.match != "" {
				text += "  clusterFeatureMatch: " + tc.match + "\n"
			}
			r := compileYAML(t, spec(text))
			if got := r.Sources(tc.features); got != tc.want {
				t.Errorf("Sources = %v, want %v", got, tc.want)
			}
			// The engine lists no features for a rule that does not need them: Sources
			// must then take every peer.
			if got := r.NeedsFeatures(); got != (tc.match != "") {
				t.Errorf("NeedsFeatures = %v with clusterFeatureMatch %q", got, tc.match)
			}
			if !r.NeedsFeatures() && !r.Sources(nil) {
				t.Errorf("a rule that needs no features refuses a peer without any")
			}
		})
	}
}

func TestSourceNamespaces(t *testing.T) {
	tests := []struct {
		name           string
		rules          string
		want           []string
		wantRestricted bool
	}{
		{name: "no match list", rules: "[{}]"},
		{name: "an entry without namespaces", rules: "[{match: [{namespaces: [a]}, {objectKey: {name: x}}]}]"},
		{name: "namespaces and objectKey", rules: "[{match: [{namespaces: [b, a]}, {objectKey: {namespace: c}}]}, {match: [{namespaces: [a]}]}]", want: []string{"a", "b", "c"}, wantRestricted: true},
		{name: "intersection", rules: "[{match: [{namespaces: [b, a], objectKey: {namespace: a}}]}]", want: []string{"a"}, wantRestricted: true},
		{name: "one unrestricted rule", rules: "[{match: [{namespaces: [a]}]}, {}]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := compileYAML(t, spec("  groupVersionKind: {version: v1, kind: Secret}\n  rules: "+tc.rules+"\n"))
			got, restricted := r.SourceNamespaces()
			if diff := cmp.Diff(tc.want, got); diff != "" || restricted != tc.wantRestricted {
				t.Errorf("SourceNamespaces = %v, %v; want %v, %v", got, restricted, tc.want, tc.wantRestricted)
			}
		})
	}
}
