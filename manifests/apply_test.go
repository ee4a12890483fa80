package manifests_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/manifests/serverside"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var installOnce struct {
	sync.Once
	results []serverside.Result
	err     error
}

// installed applies every embedded manifest to the bed's cluster once per test binary
// and waits until the CRDs are established; it returns the admin client.
func installed(t *testing.T) client.Client {
	t.Helper()
	testbed.SkipIfNoAssets(t)
	if bed == nil {
		t.Fatal("test binaries are present but the test bed did not start")
	}
	c, err := bed.Clusters[0].Client()
	if err != nil {
		t.Fatal(err)
	}
	installOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		objs, err := manifests.Objects()
		if err != nil {
			installOnce.err = err
			return
		}
		installOnce.results, installOnce.err = serverside.Apply(ctx, c, v1alpha1.FieldManager, objs)
		if installOnce.err == nil {
			crds := 0
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					crds++
				}
			}
			installOnce.err = waitEstablished(ctx, c, crds)
		}
	})
	if installOnce.err != nil {
		t.Fatalf("installing the manifests: %v", installOnce.err)
	}
	return c
}

// waitEstablished waits until the registry's crds CRDs are established.
func waitEstablished(ctx context.Context, c client.Client, crds int) error {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var list apiextensionsv1.CustomResourceDefinitionList
		if err := c.List(ctx, &list); err != nil {
			return false, err
		}
		established := 0
		for _, crd := range list.Items {
			if crd.Spec.Group != v1alpha1.GroupVersion.Group {
				continue
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established++
				}
			}
		}
		return established == crds, nil
	})
}

// TestApplyIsIdempotent applies every manifest server-side to a real API server (the
// first apply creates everything), then again: nothing may change the second time.
func TestApplyIsIdempotent(t *testing.T) {
	c := installed(t)
	for _, r := range installOnce.results {
		if r.Outcome != serverside.Created {
			t.Errorf("first apply of %s %s: %s, want created", r.Object.GetKind(), r.Object.GetName(), r.Outcome)
		}
	}
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	results, err := serverside.Apply(context.Background(), c, v1alpha1.FieldManager, objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Outcome != serverside.Unchanged {
			t.Errorf("second apply of %s %s: %s, want unchanged", r.Object.GetKind(), r.Object.GetName(), r.Outcome)
		}
	}
}

// TestCRDsRejectInvalidObjects creates invalid registry objects, as a user would
// apply them, and expects the API server to reject each with a message naming the
// field; the valid ones next to them must be accepted.
func TestCRDsRejectInvalidObjects(t *testing.T) {
	c := installed(t)
	tests := []struct {
		name    string
		yaml    string
		wantErr string // substring of the rejection; empty: must be accepted
	}{
		{
			name:    "cluster without clusterID",
			yaml:    "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: Cluster\nmetadata: {name: no-id}\nspec:\n  authInfo: {secretRef: {name: x, namespace: cluster-registry}}\n",
			wantErr: "spec.clusterID: Required value",
		},
		{
			name:    "cluster without spec",
			yaml:    "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: Cluster\nmetadata: {name: no-spec}\n",
			wantErr: "spec: Required value",
		},
		{
			name:    "cluster with empty clusterID",
			yaml:    "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: Cluster\nmetadata: {name: empty-id}\nspec: {clusterID: \"\"}\n",
			wantErr: "spec.clusterID",
		},
		{
			name: "valid cluster",
			yaml: "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: Cluster\nmetadata: {name: valid}\nspec:\n  clusterID: 0a3c5a6e-2f0c-4c3b-9d5e-6f7a8b9c0d1e\n  authInfo: {secretRef: {name: valid, namespace: cluster-registry}}\n  kubernetesApiEndpoints: [{serverAddress: \"https://203.0.113.10:6443\"}]\n",
		},
		{
			name:    "rule without groupVersionKind",
			yaml:    "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: ResourceSyncRule\nmetadata: {name: no-gvk}\nspec:\n  rules: [{match: [{objectKey: {name: x}}]}]\n",
			wantErr: "spec.groupVersionKind: Required value",
		},
		{
			name:    "rule without kind",
			yaml:    "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: ResourceSyncRule\nmetadata: {name: no-kind}\nspec:\n  groupVersionKind: {version: v1}\n  rules: []\n",
			wantErr: "spec.groupVersionKind.kind: Required value",
		},
		{
			name:    "rule with unknown override type",
			yaml:    "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: ResourceSyncRule\nmetadata: {name: bad-override}\nspec:\n  groupVersionKind: {version: v1, kind: ConfigMap}\n  rules: [{mutations: {overrides: [{type: merge, path: data.x, value: y}]}}]\n",
			wantErr: "spec.rules[0].mutations.overrides[0].type: Unsupported value",
		},
		{
			name:    "feature without featureName",
			yaml:    "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: ClusterFeature\nmetadata: {name: no-name}\nspec: {}\n",
			wantErr: "spec.featureName: Required value",
		},
		{
			name:    "feature with empty featureName",
			yaml:    "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: ClusterFeature\nmetadata: {name: empty-name}\nspec: {featureName: \"\"}\n",
			wantErr: "spec.featureName",
		},
		{
			name:    "feature name with spaces",
			yaml:    "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: ClusterFeature\nmetadata: {name: spaces}\nspec: {featureName: \"my feature!\"}\n",
			wantErr: "spec.featureName: Invalid value",
		},
		{
			name: "feature name with a prefix",
			yaml: "apiVersion: clusterregistry.k8s.cisco.com/v1alpha1\nkind: ClusterFeature\nmetadata: {name: prefixed}\nspec: {featureName: istio.example.com/multi-cluster_v2}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := decodeOne(t, []byte(tt.yaml))
			err := c.Create(context.Background(), obj, client.FieldValidation("Strict"))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("valid object rejected: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("invalid object accepted, want an error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestSeedExamplesRoundTrip applies the seed's example YAML (testdata/seed) and reads
// it back: what the user wrote must come back unchanged.
func TestSeedExamplesRoundTrip(t *testing.T) {
	c := installed(t)
	files := []string{
		"resourcesyncrule-test-secret-sink.yaml",
		"clusterfeature-test-secret-source.yaml",
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			want := decodeOne(t, readSeed(t, f))
			if err := c.Create(context.Background(), want.DeepCopy(), client.FieldValidation("Strict")); err != nil {
				t.Fatalf("applying %s: %v", f, err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(want.GroupVersionKind())
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(want), got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Object["spec"], got.Object["spec"]); diff != "" {
				t.Errorf("spec read back differs (-applied +read):\n%s", diff)
			}
			if diff := cmp.Diff(want.GetAnnotations(), got.GetAnnotations()); diff != "" {
				t.Errorf("annotations read back differ (-applied +read):\n%s", diff)
			}
		})
	}
	// The two later versions of the rule in the seed's walkthrough update it in place.
	for _, f := range []string{"resourcesyncrule-test-secret-sink-sync-disabled.yaml", "resourcesyncrule-test-secret-sink-feature.yaml"} {
		t.Run(f, func(t *testing.T) {
			want := decodeOne(t, readSeed(t, f))
			if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(want.DeepCopy()), client.FieldOwner("seed-user"), client.ForceOwnership); err != nil {
				t.Fatalf("applying %s: %v", f, err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(want.GroupVersionKind())
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(want), got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Object["spec"], got.Object["spec"]); diff != "" {
				t.Errorf("spec read back differs (-applied +read):\n%s", diff)
			}
			if got.GetAnnotations()[v1alpha1.SyncDisabledAnnotation] != "true" {
				t.Errorf("annotation %s lost: %v", v1alpha1.SyncDisabledAnnotation, got.GetAnnotations())
			}
		})
	}
}

// TestFlattenedSeedRuleIsRejected: read literally, the seed's flattened text puts
// name/namespace beside an empty objectKey. A rule like that would match every Secret,
// so the API server must refuse it (kubectl's default strict validation) rather than
// drop the fields.
func TestFlattenedSeedRuleIsRejected(t *testing.T) {
	c := installed(t)
	obj := decodeOne(t, readSeed(t, "flattened-objectkey.yaml"))
	err := c.Create(context.Background(), obj, client.FieldValidation("Strict"))
	if err == nil {
		t.Fatal("the flattened rule was accepted; it would sync every Secret")
	}
	if !strings.Contains(err.Error(), `unknown field "spec.rules[0].match[0].name"`) {
		t.Errorf("error does not name the misplaced field: %v", err)
	}
}

func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "seed", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func decodeOne(t *testing.T, data []byte) *unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("want one object, got %d", len(objs))
	}
	return objs[0]
}
