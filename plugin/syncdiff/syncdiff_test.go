package syncdiff

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{
		Names:             []string{"a", "b", "c"},
		CRDDirectoryPaths: []string{"../../manifests/crds"},
	}, &bed))
}

const testNS = "diff-test"

const ruleYAML = `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: diff-configmaps
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match:
    - namespaces: [diff-test]
      labels:
      - matchLabels: {sync: "yes"}
`

const secretRuleYAML = `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: diff-secrets
spec:
  groupVersionKind: {version: v1, kind: Secret}
  rules:
  - match:
    - namespaces: [diff-test]
`

// runSyncDiff runs "kubectl registry sync-diff" through cobra under a root that has the
// kubeconfig flags, like the plugin's, and returns the exit code main would use.
func runSyncDiff(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{newCmd}, Timeout: 2 * time.Minute}
	return cmd.Exit(t, append([]string{"sync-diff", "--kubeconfig", bed.KubeconfigPath}, args...)...)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func parsePlan(t *testing.T, out string) plan {
	t.Helper()
	var p plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("the -o json output does not parse: %v\n%s", err, out)
	}
	return p
}

// copies lists, on every cluster, the ConfigMaps of the test namespace that carry the
// ownership mark: what the controllers wrote.
func copies(t *testing.T, cls map[string]client.Client) []string {
	t.Helper()
	var out []string
	for name, cl := range cls {
		var l corev1.ConfigMapList
		if err := cl.List(context.Background(), &l, client.InNamespace(testNS), client.HasLabels{v1alpha1.OwnershipLabel}); err != nil {
			t.Fatal(err)
		}
		for _, c := range l.Items {
			out = append(out, name+" "+c.Namespace+"/"+c.Name)
		}
	}
	sort.Strings(out)
	return out
}

func TestSyncDiff(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	cls := harness.FormGroup(t, bed, "a", "b", "c")
	harness.Grant(t, cls, "", "configmaps")
	ctx := context.Background()
	for _, cl := range cls {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"one", "two", "local-only"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: n, Labels: map[string]string{"sync": "yes"}}, Data: map[string]string{"k": n}}
		if n == "local-only" {
			cm.Labels = nil
		}
		if err := cls["a"].Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	ruleFile := writeFile(t, "rule.yaml", ruleYAML)

	t.Run("usage errors exit with 2", func(t *testing.T) {
		for _, args := range [][]string{
			{"--contexts", "a,b", "--context", "a"},
			{"--contexts", "a", "-o", "wide"},
			{"--contexts", "a,nope"},
			{"--contexts", "a", "-f", filepath.Join(t.TempDir(), "missing.yaml")},
		} {
			if _, _, code := runSyncDiff(t, args...); code != 2 {
				t.Errorf("sync-diff %v: exit %d, want 2", args, code)
			}
		}
	})

	var predicted []string
	t.Run("a previewed rule predicts the creates on b and c", func(t *testing.T) {
		out, _, code := runSyncDiff(t, "--contexts", "a,b,c", "-f", ruleFile)
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		for _, want := range []string{"cluster b (context b): 2 create", "cluster c (context c): 2 create", "create    ConfigMap diff-test/one (rule diff-configmaps, from a)"} {
			if !strings.Contains(out, want) {
				t.Errorf("the output has no %q", want)
			}
		}
		out, _, code = runSyncDiff(t, "--contexts", "a,b,c", "-f", ruleFile, "-o", "json")
		if code != 1 {
			t.Fatalf("-o json: exit %d, want 1", code)
		}
		for _, it := range parsePlan(t, out).Items {
			if it.Action != "create" || it.Rule != "diff-configmaps" || it.From != "a" || it.Object == nil {
				t.Errorf("unexpected item %+v", it)
			}
			predicted = append(predicted, it.Cluster+" "+it.Namespace+"/"+it.Name)
		}
		sort.Strings(predicted)
		want := []string{"b diff-test/one", "b diff-test/two", "c diff-test/one", "c diff-test/two"}
		if diff := cmp.Diff(want, predicted); diff != "" {
			t.Errorf("predicted creates (-want +got):\n%s", diff)
		}
		if got := copies(t, cls); len(got) != 0 {
			t.Errorf("sync-diff wrote copies: %v", got)
		}
		var rules v1alpha1.ResourceSyncRuleList
		if err := cls["a"].List(ctx, &rules); err != nil || len(rules.Items) != 0 {
			t.Errorf("sync-diff wrote rules: %v %v", rules.Items, err)
		}
	})

	t.Run("the controllers make exactly the predicted writes, then there is no difference", func(t *testing.T) {
		var r v1alpha1.ResourceSyncRule
		if err := yaml.UnmarshalStrict([]byte(ruleYAML), &r); err != nil {
			t.Fatal(err)
		}
		if err := cls["a"].Create(ctx, &r); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 60*time.Second, "sync-diff reports no differences", func() error {
			if _, _, code := runSyncDiff(t, "--contexts", "a,b,c"); code != 0 {
				return fmt.Errorf("exit %d", code)
			}
			return nil
		})
		if diff := cmp.Diff(predicted, copies(t, cls)); diff != "" {
			t.Errorf("the controllers' copies differ from the prediction (-predicted +written):\n%s", diff)
		}
		out, _, code := runSyncDiff(t, "--contexts", "a,b,c", "-v", "diff-configmaps")
		if code != 0 || !strings.Contains(out, "unchanged ConfigMap diff-test/one") {
			t.Errorf("-v does not list the unchanged copies (exit %d)", code)
		}
		// --context alone: the peers are read through the other contexts.
		if out, _, code := runSyncDiff(t, "--context", "b"); code != 0 || !strings.Contains(out, "cluster b (context b): 3 unchanged") {
			t.Errorf("--context b: exit %d", code)
		}
	})

	t.Run("Secret data is masked", func(t *testing.T) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "s"}, StringData: map[string]string{"password": "hunter2"}}
		if err := cls["a"].Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		secretFile := writeFile(t, "secrets.yaml", secretRuleYAML)
		out, _, code := runSyncDiff(t, "--contexts", "a,b,c", "-f", secretFile, "-o", "yaml")
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		if strings.Contains(out, "aHVudGVyMg==") || !strings.Contains(out, "password: '***'") {
			t.Errorf("the Secret data is not masked:\n%s", out)
		}
		out, _, _ = runSyncDiff(t, "--contexts", "a,b,c", "-f", secretFile, "-o", "yaml", "--show-secrets")
		if !strings.Contains(out, "aHVudGVyMg==") {
			t.Errorf("--show-secrets does not show the data:\n%s", out)
		}
	})

	t.Run("an unreachable context is reported, the others diffed, exit 2", func(t *testing.T) {
		if err := bed.Cluster("c").Cut(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bed.Cluster("c").Heal() })
		out, errOut, code := runSyncDiff(t, "--contexts", "a,b,c", "diff-configmaps")
		if code != 2 {
			t.Errorf("exit %d, want 2", code)
		}
		if !strings.Contains(errOut, "context c") {
			t.Errorf("stderr does not name context c")
		}
		for _, want := range []string{"cluster a (context a)", "cluster b (context b)"} {
			if !strings.Contains(out, want) {
				t.Errorf("the output has no %q", want)
			}
		}
	})
}
