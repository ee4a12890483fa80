package rules

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

const seedDir = "../../testdata/seed"

func seedRule(t *testing.T, file string) *Rule {
	t.Helper()
	return compileYAML(t, readFile(t, filepath.Join(seedDir, file)))
}

// secret is the seed's test Secret (testdata/seed/test-secret.yaml, which has no
// namespace) in namespace ns under name.
func secret(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	o := object(t, readFile(t, filepath.Join(seedDir, "test-secret.yaml")))
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

func TestSeedExamples(t *testing.T) {
	for _, file := range []string{
		"resourcesyncrule-test-secret-sink.yaml",
		"resourcesyncrule-test-secret-sink-sync-disabled.yaml",
		"resourcesyncrule-test-secret-sink-feature.yaml",
	} {
		t.Run(file, func(t *testing.T) {
			r := seedRule(t, file)
			for _, tc := range []struct {
				ns, name string
				want     bool
			}{
				{"cluster-registry", "test-secret", true},
				{"default", "test-secret", false},
				{"cluster-registry", "other-secret", false},
			} {
				obj := secret(t, tc.ns, tc.name)
				m, ok := r.Match(obj)
				if ok != tc.want {
					t.Errorf("Match(%s/%s) = %v, want %v", tc.ns, tc.name, ok, tc.want)
					continue
				}
				if !ok {
					continue
				}
				key, synced := m.TargetKey(types.NamespacedName{Namespace: tc.ns, Name: tc.name})
				if !synced || key != (types.NamespacedName{Namespace: tc.ns, Name: tc.name}) {
					t.Errorf("TargetKey = %v, %v", key, synced)
				}
				out, err := m.Apply(obj, TemplateContext{})
				if err != nil {
					t.Fatal(err)
				}
				if out.GetName() != tc.name || out.GetNamespace() != tc.ns || out.GetKind() != "Secret" || out.GetAPIVersion() != "v1" {
					t.Errorf("Apply = %v", out.Object)
				}
			}
		})
	}
}

func TestSeedClusterFeatureMatch(t *testing.T) {
	var source v1alpha1.ClusterFeature
	if err := yaml.UnmarshalStrict([]byte(readFile(t, filepath.Join(seedDir, "clusterfeature-test-secret-source.yaml"))), &source); err != nil {
		t.Fatal(err)
	}
	other := *source.DeepCopy()
	other.Name, other.Spec.FeatureName = "other", "other-feature"

	feature := seedRule(t, "resourcesyncrule-test-secret-sink-feature.yaml")
	everywhere := seedRule(t, "resourcesyncrule-test-secret-sink.yaml")
	tests := []struct {
		name     string
		rule     *Rule
		features []v1alpha1.ClusterFeature
		want     bool
	}{
		{"feature rule, no ClusterFeature", feature, nil, false},
		{"feature rule, another feature", feature, []v1alpha1.ClusterFeature{other}, false},
		{"feature rule, test-secret-feature", feature, []v1alpha1.ClusterFeature{other, source}, true},
		{"rule without clusterFeatureMatch, no ClusterFeature", everywhere, nil, true},
	}
	for _, tc := range tests {
		if got := tc.rule.Sources(tc.features); got != tc.want {
			t.Errorf("%s: Sources = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSeedFlattenedObjectKey shows why the API server must reject the seed's flattened
// objectKey (testdata/seed/flattened-objectkey.yaml): decoded leniently, its match entry
// is empty and matches every Secret.
func TestSeedFlattenedObjectKey(t *testing.T) {
	text := readFile(t, filepath.Join(seedDir, "flattened-objectkey.yaml"))
	var strict v1alpha1.ResourceSyncRule
	if err := yaml.UnmarshalStrict([]byte(text), &strict); err == nil {
		t.Fatal("strict decoding accepted the flattened objectKey")
	}
	var lenient v1alpha1.ResourceSyncRule
	if err := yaml.Unmarshal([]byte(text), &lenient); err != nil {
		t.Fatal(err)
	}
	r, err := Compile(&lenient)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Match(secret(t, "default", "any-secret")); !ok {
		t.Error("the lenient decoding no longer matches every Secret; update the seed README")
	}
}
