package rules

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestCommonSelector(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec string
		want string
	}{
		{"one entry: its selector", `  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - labels:
      - matchLabels: {app: web, tier: front}
`, "app in (web),tier in (front)"},
		{"entries ORed: the values joined, keys not in every entry dropped", `  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - labels:
      - matchLabels: {app: web, tier: front}
      - matchExpressions: [{key: app, operator: In, values: [api, db]}]
  - match:
    - namespaces: [x]
      labels:
      - matchLabels: {app: web}
`, "app in (api,db,web)"},
		{"exists when one entry allows any value", `  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - labels:
      - matchLabels: {app: web}
      - matchExpressions: [{key: app, operator: Exists}]
`, "app"},
		{"absence shared", `  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - labels:
      - matchExpressions: [{key: skip, operator: DoesNotExist}, {key: a, operator: NotIn, values: [x]}]
      - matchExpressions: [{key: skip, operator: DoesNotExist}]
`, "!skip"},
		{"NotIn alone cannot narrow", `  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - labels:
      - matchExpressions: [{key: a, operator: NotIn, values: [x]}]
`, ""},
		{"an entry without labels selects every label", `  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - labels:
      - matchLabels: {app: web}
    - namespaces: [x]
`, ""},
		{"an entry of spec.rules without match selects everything", `  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - labels:
      - matchLabels: {app: web}
  - mutations:
      labels:
        add: {a: b}
`, ""},
		{"no entries: nothing to narrow by", `  groupVersionKind: {version: v1, kind: ConfigMap}
`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := compileYAML(t, spec(tc.spec))
			got := CommonSelector(r.LabelAlternatives())
			if got.String() != tc.want {
				t.Errorf("CommonSelector = %q, want %q", got.String(), tc.want)
			}
		})
	}
}

// TestCommonSelectorIsASuperset checks the property the engine relies on: every label
// set that matches one of the alternatives matches the common selector.
func TestCommonSelectorIsASuperset(t *testing.T) {
	alts := []string{"app=web,tier in (a,b)", "app in (api),tier", "app=web,!skip,tier=a", "app,tier notin (c)", "tier>3,app=x"}
	sets := []labels.Set{{}, {"app": "web"}, {"app": "web", "tier": "a"}, {"app": "api", "tier": "z"}, {"app": "x", "tier": "5"}, {"app": "q", "tier": "d"}, {"tier": "a"}, {"app": "web", "tier": "b", "skip": "1"}}
	for i := range alts {
		for j := i; j < len(alts); j++ {
			var sels []labels.Selector
			for _, a := range alts[i : j+1] {
				s, err := labels.Parse(a)
				if err != nil {
					t.Fatal(err)
				}
				sels = append(sels, s)
			}
			common := CommonSelector(sels)
			for _, set := range sets {
				for _, s := range sels {
					if s.Matches(set) && !common.Matches(set) {
						t.Errorf("%v matches %s but not the common selector %q", set, s, common)
					}
				}
			}
			t.Logf("%v -> %q", alts[i:j+1], common)
		}
	}
}
