package rules

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// decodeRule decodes a ResourceSyncRule from YAML; unknown fields are errors.
func decodeRule(t testing.TB, text string) *v1alpha1.ResourceSyncRule {
	t.Helper()
	var rsr v1alpha1.ResourceSyncRule
	if err := yaml.UnmarshalStrict([]byte(text), &rsr); err != nil {
		t.Fatalf("decode rule: %v\n%s", err, text)
	}
	return &rsr
}

// compileYAML compiles a ResourceSyncRule given as YAML and fails the test on error.
func compileYAML(t testing.TB, text string) *Rule {
	t.Helper()
	r, err := Compile(decodeRule(t, text))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return r
}

// spec wraps the YAML of a spec (indented by two spaces) into a ResourceSyncRule.
func spec(text string) string {
	return "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: ResourceSyncRule\nmetadata:\n  name: test\nspec:\n" + text
}

// object decodes an object from YAML with the number types of unstructured content.
func object(t testing.TB, text string) *unstructured.Unstructured {
	t.Helper()
	return &unstructured.Unstructured{Object: objectContent(t, text)}
}

func objectContent(t testing.TB, text string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatalf("object YAML: %v", err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatalf("object JSON: %v", err)
	}
	return m
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
