package rules

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestTargetKey(t *testing.T) {
	nn := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	tests := []struct {
		name       string
		m          Mutation
		source     types.NamespacedName
		want       types.NamespacedName
		wantSynced bool
	}{
		{name: "no rewrite", source: nn("apps", "web"), want: nn("apps", "web"), wantSynced: true},
		{name: "add prefix and suffix",
			m:      Mutation{Name: v1alpha1.NameMutations{AddPrefix: "p-", AddSuffix: "-s"}, Namespace: v1alpha1.NameMutations{AddSuffix: "-copy"}},
			source: nn("apps", "web"), want: nn("apps-copy", "p-web-s"), wantSynced: true},
		{name: "strip the shard suffix",
			m:      Mutation{Name: v1alpha1.NameMutations{StripSuffix: "-eu1"}, Namespace: v1alpha1.NameMutations{StripSuffix: "-eu1"}},
			source: nn("tenant-eu1", "app-eu1"), want: nn("tenant", "app"), wantSynced: true},
		{name: "name lacks the suffix",
			m:      Mutation{Name: v1alpha1.NameMutations{StripSuffix: "-eu1"}},
			source: nn("tenant", "app-us1")},
		{name: "namespace lacks the suffix",
			m:      Mutation{Namespace: v1alpha1.NameMutations{StripSuffix: "-eu1"}},
			source: nn("tenant-us1", "app")},
		{name: "nothing left after stripping",
			m:      Mutation{Name: v1alpha1.NameMutations{StripPrefix: "eu1-", AddPrefix: "x"}},
			source: nn("", "eu1-")},
		{name: "strip prefix then suffix, then add",
			m:      Mutation{Name: v1alpha1.NameMutations{StripPrefix: "shard-", StripSuffix: "-eu1", AddPrefix: "local-", AddSuffix: "-copy"}},
			source: nn("apps", "shard-app-eu1"), want: nn("apps", "local-app-copy"), wantSynced: true},
		{name: "strips apply in order",
			m:      Mutation{Name: v1alpha1.NameMutations{StripPrefix: "ab", StripSuffix: "bc"}},
			source: nn("", "abc")},
		{name: "a cluster-scoped object ignores namespace rewrites",
			m:      Mutation{Name: v1alpha1.NameMutations{AddSuffix: "-copy"}, Namespace: v1alpha1.NameMutations{StripSuffix: "-eu1", AddPrefix: "x-"}},
			source: nn("", "admin"), want: nn("", "admin-copy"), wantSynced: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, synced := tc.m.TargetKey(tc.source)
			if got != tc.want || synced != tc.wantSynced {
				t.Errorf("TargetKey(%v) = %v, %v; want %v, %v", tc.source, got, synced, tc.want, tc.wantSynced)
			}
		})
	}
}

const shardRule = `  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{labels: [{matchLabels: {shard: eu1}}]}]
    mutations:
      name: {stripSuffix: -eu1}
      namespace: {stripSuffix: -eu1}
  - match: [{labels: [{matchLabels: {prefixed: "true"}}]}]
    mutations:
      name: {addPrefix: copy-}
  - match: [{labels: [{matchLabels: {plain: "true"}}]}]
  - match: [{labels: [{matchLabels: {moved: "true"}}]}]
    mutations:
      namespace: {addPrefix: moved-}
`

func TestSourceKeys(t *testing.T) {
	r := compileYAML(t, spec(shardRule))
	nn := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	tests := []struct {
		target types.NamespacedName
		want   []types.NamespacedName
	}{
		{nn("tenant", "app"), []types.NamespacedName{nn("tenant", "app"), nn("tenant", "app-eu1"), nn("tenant-eu1", "app"), nn("tenant-eu1", "app-eu1")}},
		{nn("tenant", "copy-app"), []types.NamespacedName{
			nn("tenant", "app"), nn("tenant", "copy-app"), nn("tenant", "copy-app-eu1"),
			nn("tenant-eu1", "app"), nn("tenant-eu1", "copy-app"), nn("tenant-eu1", "copy-app-eu1"),
		}},
		{nn("moved-tenant", "app"), []types.NamespacedName{
			nn("moved-tenant", "app"), nn("moved-tenant", "app-eu1"), nn("moved-tenant-eu1", "app"), nn("moved-tenant-eu1", "app-eu1"),
			nn("tenant", "app"), nn("tenant", "app-eu1"),
		}},
		{nn("", "admin"), []types.NamespacedName{nn("", "admin"), nn("", "admin-eu1")}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, r.SourceKeys(tc.target)); diff != "" {
			t.Errorf("SourceKeys(%v) (-want +got):\n%s", tc.target, diff)
		}
	}
	if got := compileYAML(t, spec("  groupVersionKind: {version: v1, kind: ConfigMap}\n  rules: []\n")).SourceKeys(nn("a", "b")); got != nil {
		t.Errorf("a rule without rules has source keys %v", got)
	}
}

// TestSourceKeysInvertTargetKey checks, for every combination of matching rules and
// names, that the source of a copy is among the SourceKeys of the copy's key.
func TestSourceKeysInvertTargetKey(t *testing.T) {
	r := compileYAML(t, spec(shardRule))
	labelSets := []string{"shard: eu1", "prefixed: \"true\"", "plain: \"true\"", "moved: \"true\""}
	names := []string{"app", "app-eu1", "copy-app", "eu1", "-eu1", "a-eu1-eu1"}
	namespaces := []string{"", "tenant", "tenant-eu1", "moved-x"}
	checked := 0
	for mask := 1; mask < 1<<len(labelSets); mask++ {
		labels := ""
		for i, l := range labelSets {
			if mask&(1<<i) != 0 {
				labels += "    " + l + "\n"
			}
		}
		for _, ns := range namespaces {
			for _, name := range names {
				obj := object(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %q\n  namespace: %q\n  labels:\n%s", name, ns, labels))
				m, ok := r.Match(obj)
				if !ok {
					t.Fatalf("labels %q do not match", labels)
				}
				source := types.NamespacedName{Namespace: ns, Name: name}
				target, synced := m.TargetKey(source)
				if !synced {
					continue
				}
				checked++
				if keys := r.SourceKeys(target); !slices.Contains(keys, source) {
					t.Errorf("labels %q: %v maps to %v, whose SourceKeys %v miss it", labels, source, target, keys)
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d combinations checked", checked)
	}
}
