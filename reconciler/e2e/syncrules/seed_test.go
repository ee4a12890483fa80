package syncrules

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Names: []string{"first", "second", "third"}, CRDDirectoryPaths: []string{"../../../manifests/crds"}}, &bed))
}

const ns = v1alpha1.DefaultNamespace

// apply server-side applies a file of testdata/seed as a user would, into namespace
// (for namespaced objects without one).
func apply(t *testing.T, cl client.Client, file, namespace string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "seed", file))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: %v", file, err)
	}
	obj := objs[0]
	if obj.GetKind() == "Secret" && obj.GetNamespace() == "" {
		obj.SetNamespace(namespace)
	}
	if err := cl.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.FieldOwner("seed-user"), client.ForceOwnership); err != nil {
		t.Fatalf("applying %s: %v", file, err)
	}
	return obj
}

func secret(cl client.Client, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	err := cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)
	return &s, err
}

func rule(cl client.Client, name string) (*v1alpha1.ResourceSyncRule, error) {
	var r v1alpha1.ResourceSyncRule
	err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &r)
	return &r, err
}

func absent(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("it exists")
	}
	return err
}

// TestSeedScenarios walks the seed's "ResourceSyncRule example usage" step by step, with
// its own YAML: sync everywhere, sync to a set of clusters, sync from a set of clusters.
func TestSeedScenarios(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	cl := harness.FormGroup(t, bed, "first", "second", "third")
	first, second, third := cl["first"], cl["second"], cl["third"]
	thirdID, err := bed.Cluster("third").KubeSystemUID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	firstID, err := bed.Cluster("first").KubeSystemUID(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("sync everywhere", func(t *testing.T) {
		apply(t, third, "test-secret.yaml", ns)
		apply(t, first, "resourcesyncrule-test-secret-sink.yaml", "")
		harness.Eventually(t, 30*time.Second, "the rule and the secret appear on all clusters", func() error {
			for name, c := range map[string]client.Client{"second": second, "third": third} {
				r, err := rule(c, "test-secret-sink")
				if err != nil {
					return fmt.Errorf("rule on %s: %w", name, err)
				}
				if r.Annotations[v1alpha1.OwnershipAnnotation] != string(firstID) {
					return fmt.Errorf("the rule on %s is marked %q, want %s", name, r.Annotations[v1alpha1.OwnershipAnnotation], firstID)
				}
			}
			for name, c := range map[string]client.Client{"first": first, "second": second} {
				s, err := secret(c, "test-secret")
				if err != nil {
					return fmt.Errorf("secret on %s: %w", name, err)
				}
				if s.Annotations[v1alpha1.OwnershipAnnotation] != string(thirdID) || s.Labels[v1alpha1.OwnershipLabel] != string(thirdID) {
					return fmt.Errorf("the secret on %s is marked %v / %v, want %s", name, s.Annotations, s.Labels, thirdID)
				}
			}
			// The origin keeps its own, unmarked.
			s, err := secret(third, "test-secret")
			if err != nil {
				return err
			}
			if _, ok := s.Annotations[v1alpha1.OwnershipAnnotation]; ok {
				return fmt.Errorf("the original on third got an ownership mark")
			}
			return nil
		})

		// Modified on a non-origin cluster, including added keys: restored exactly.
		// second's controller writes this copy too: harness.Update retries on conflict.
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "test-secret"}}
		if err := harness.Update(context.Background(), second, s, func() {
			s.Data = map[string][]byte{"injected": []byte("x")}
			s.Labels["added-locally"] = "yes"
			s.Annotations["added-locally"] = "yes"
		}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "the modified copy on second is restored", func() error {
			s, err := secret(second, "test-secret")
			if err != nil {
				return err
			}
			if len(s.Data) != 0 || s.Labels["added-locally"] != "" || s.Annotations["added-locally"] != "" {
				return fmt.Errorf("not restored: data %v labels %v annotations %v", s.Data, s.Labels, s.Annotations)
			}
			return nil
		})
		// Deleted on a non-origin cluster: recreated.
		s, err = secret(first, "test-secret")
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Delete(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "the deleted copy on first is recreated", func() error {
			_, err := secret(first, "test-secret")
			return err
		})
	})

	t.Run("rules never touch the membership's Clusters and reader Secrets", func(t *testing.T) {
		// A rule syncing every Secret of the registry namespace: the reader kubeconfig
		// Secrets there belong to the membership sync and must stay exactly as they are.
		applyRuleYAML(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: all-registry-secrets
  annotations: {cluster-registry.k8s.cisco.com/resource-sync-disabled: "true"}
spec:
  groupVersionKind: {kind: Secret, version: v1}
  rules:
  - match:
    - namespaces: [cluster-registry]
`)
		versions := func() map[string]string {
			out := map[string]string{}
			for cname, c := range cl {
				var list corev1.SecretList
				if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
					t.Fatal(err)
				}
				for _, s := range list.Items {
					if s.Type == v1alpha1.SecretTypeClusterRegistry {
						out[cname+"/"+s.Name] = s.ResourceVersion
					}
				}
			}
			return out
		}
		before := versions()
		// On each cluster: the 3 clusters' shared reader Secrets, the credentials it
		// issued to its 2 peers and the 2 it received from them.
		if len(before) != 3*(3+2+2) {
			t.Fatalf("want 7 reader Secrets on each of 3 clusters, got %v", before)
		}
		harness.Stays(t, 6*time.Second, "the reader Secrets are left alone", func() error {
			if now := versions(); fmt.Sprint(now) != fmt.Sprint(before) {
				return fmt.Errorf("reader Secrets changed: %v -> %v", before, now)
			}
			return nil
		})
		for name, c := range cl {
			if err := harness.Members(c, name, "first", "second", "third"); err != nil {
				t.Fatal(err)
			}
		}
		r, err := rule(first, "all-registry-secrets")
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Delete(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("sync to a set of clusters", func(t *testing.T) {
		// Without the annotation, a deleted rule comes back.
		r, err := rule(third, "test-secret-sink")
		if err != nil {
			t.Fatal(err)
		}
		if err := third.Delete(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "the rule deleted on third is recreated", func() error {
			_, err := rule(third, "test-secret-sink")
			return err
		})

		apply(t, first, "resourcesyncrule-test-secret-sink-sync-disabled.yaml", "")
		time.Sleep(time.Second)
		r, err = rule(second, "test-secret-sink")
		if err != nil {
			t.Fatal(err)
		}
		if err := second.Delete(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		harness.Stays(t, 5*time.Second, "the rule deleted on second is not recreated", func() error {
			_, err := rule(second, "test-secret-sink")
			return absent(err)
		})
		s, err := secret(second, "test-secret")
		if err != nil {
			t.Fatal(err)
		}
		if err := second.Delete(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		harness.Stays(t, 5*time.Second, "the secret deleted on second is not recreated", func() error {
			_, err := secret(second, "test-secret")
			return absent(err)
		})
	})

	t.Run("sync from a set of clusters", func(t *testing.T) {
		apply(t, first, "resourcesyncrule-test-secret-sink-feature.yaml", "")
		time.Sleep(time.Second)
		s, err := secret(first, "test-secret")
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Delete(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		harness.Stays(t, 5*time.Second, "with no ClusterFeature anywhere, the secret deleted on first is not recreated", func() error {
			_, err := secret(first, "test-secret")
			return absent(err)
		})
		apply(t, third, "clusterfeature-test-secret-source.yaml", "")
		harness.Eventually(t, 30*time.Second, "with the feature on third, the secret is recreated on first", func() error {
			s, err := secret(first, "test-secret")
			if err != nil {
				return err
			}
			if s.Annotations[v1alpha1.OwnershipAnnotation] != string(thirdID) {
				return fmt.Errorf("marked %q", s.Annotations[v1alpha1.OwnershipAnnotation])
			}
			return nil
		})
		// The rule reports its sources.
		harness.Eventually(t, 30*time.Second, "the rule's status names its sources", func() error {
			r, err := rule(first, "test-secret-sink")
			if err != nil {
				return err
			}
			states := map[string]v1alpha1.RuleSourceState{}
			for _, s := range r.Status.Sources {
				states[s.Cluster] = s.State
			}
			if states["third"] != v1alpha1.SourceSyncing || states["second"] != v1alpha1.SourceNotSelected {
				return fmt.Errorf("sources %+v", r.Status.Sources)
			}
			if r.Status.ObservedGeneration != r.Generation || !metaTrue(r.Status.Conditions, v1alpha1.RuleConditionReady) {
				return fmt.Errorf("status %+v", r.Status)
			}
			return nil
		})
	})
}

func metaTrue(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func applyRuleYAML(t *testing.T, cl client.Client, y string) {
	t.Helper()
	objs, err := manifests.Decode([]byte(y))
	if err != nil || len(objs) != 1 {
		t.Fatalf("decoding the rule: %v", err)
	}
	if err := cl.Create(context.Background(), objs[0]); err != nil {
		t.Fatal(err)
	}
}
