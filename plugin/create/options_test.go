package create

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestValidateRule(t *testing.T) {
	valid := func(o *RuleOptions) { o.Name = "r"; o.Kind = "Secret" }
	with := func(f func(*RuleOptions)) func(*RuleOptions) { return func(o *RuleOptions) { valid(o); f(o) } }
	plugintest.RunValidate(t, func() *RuleOptions { return NewRuleOptions(nil, genericiooptions.NewTestIOStreamsDiscard()) }, []plugintest.ValidateCase[*RuleOptions]{
		{Name: "seed's rule", Modify: with(func(o *RuleOptions) { o.ObjectName = "test-secret"; o.NamespaceMatch = []string{"cluster-registry"} })},
		{Name: "every selector", Modify: with(func(o *RuleOptions) {
			o.Group, o.Kind = "apps", "Deployment"
			o.LabelSelectors = []string{"app=web"}
			o.Features = []string{"example.com/web"}
			o.DeletionPolicy = "Delete"
		})},
		{Name: "no kind", Modify: func(o *RuleOptions) { o.Name = "r" }, Want: []string{"--kind"}},
		{Name: "bad name", Modify: with(func(o *RuleOptions) { o.Name = "Bad_Name" }), Want: []string{`invalid NAME "Bad_Name"`}},
		{Name: "bad group", Modify: with(func(o *RuleOptions) { o.Group = "Apps!" }), Want: []string{`--group "Apps!"`}},
		{Name: "namespace twice", Modify: with(func(o *RuleOptions) { o.NamespaceMatch = []string{"a", "a"} }), Want: []string{`--namespace-match "a" given twice`}},
		{Name: "name with slash", Modify: with(func(o *RuleOptions) { o.ObjectName = "ns/x" }), Want: []string{"an object name cannot contain '/'"}},
		{Name: "bad selector", Modify: with(func(o *RuleOptions) { o.LabelSelectors = []string{"a in (b"} }), Want: []string{`--label-selector "a in (b"`}},
		{Name: "deletion policy", Modify: with(func(o *RuleOptions) { o.DeletionPolicy = "Keep" }), Want: []string{`--deletion-policy must be Retain or Delete, got "Keep"`}},
		{Name: "output", Modify: with(func(o *RuleOptions) { *o.PrintFlags.OutputFormat = "table" }), Want: []string{"--output"}},
	})
}

func TestValidateFeature(t *testing.T) {
	plugintest.RunValidate(t, func() *FeatureOptions { return NewFeatureOptions(nil, genericiooptions.NewTestIOStreamsDiscard()) }, []plugintest.ValidateCase[*FeatureOptions]{
		{Name: "labels", Modify: func(o *FeatureOptions) { o.Name = "f"; o.FeatureName = "gpu"; o.Labels = []string{"tier=gold"} }},
		{Name: "no feature", Modify: func(o *FeatureOptions) { o.Name = "f" }, Want: []string{"--feature is required"}},
		{Name: "label without value", Modify: func(o *FeatureOptions) { o.Name = "f"; o.FeatureName = "gpu"; o.Labels = []string{"tier"} }, Want: []string{`--label "tier": want KEY=VALUE`}},
		{Name: "label twice", Modify: func(o *FeatureOptions) { o.Name = "f"; o.FeatureName = "gpu"; o.Labels = []string{"a=1", "a=2"} }, Want: []string{`--label: key "a" given twice`}},
	})
}

// runFake runs "kubectl registry create <args>" through the real command with f as its
// Factory.
func runFake(t *testing.T, f *kubefake.Factory, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return plugintest.Command{New: []plugintest.NewCmd{NewCmdCreate}, Factory: f}.Run(t, append([]string{"create"}, args...)...)
}

// TestRunFeatureFake creates a feature on an in-memory cluster, kubectl style: created,
// unchanged, configured, and a server dry run writes nothing.
func TestRunFeatureFake(t *testing.T) {
	f := kubefake.New([]string{"east"})
	run := func(dryRun, featureName string) string {
		t.Helper()
		out, _, err := runFake(t, f, "feature", "gpu", "--feature", featureName, "--dry-run="+dryRun)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ref := "clusterfeature.clusterregistry.k8s.cisco.com/gpu "
	got := []string{run("server", "gpu"), run("none", "gpu"), run("none", "gpu"), run("server", "gpu-2"), run("none", "gpu-2")}
	want := []string{ref + "created (server dry run)\n", ref + "created\n", ref + "unchanged\n", ref + "configured (server dry run)\n", ref + "configured\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	var cf v1alpha1.ClusterFeature
	if err := f.Cluster("east").Client.Get(context.Background(), client.ObjectKey{Name: "gpu"}, &cf); err != nil || cf.Spec.FeatureName != "gpu-2" {
		t.Errorf("feature %+v, %v", cf.Spec, err)
	}
}

// TestRunRuleFake creates a rule on the cluster of --context among in-memory clusters:
// the rule written is the one the flags describe, -o name and -o yaml print the object,
// a client dry run contacts no cluster, and an unreachable cluster is an error that
// names its context.
func TestRunRuleFake(t *testing.T) {
	f := kubefake.New([]string{"east", "west"})
	args := []string{"rule", "secrets", "--kind", "Secret", "--name", "s", "--namespace-match", "team", "--feature", "gpu", "--context", "west"}
	ref := "resourcesyncrule.clusterregistry.k8s.cisco.com/secrets"

	f.Cluster("west").Err = errors.New("connection refused")
	out, _, err := runFake(t, f, append(args, "--dry-run=client", "-o", "name")...)
	if err != nil || out != ref+"\n" {
		t.Errorf("client dry run with west unreachable: %q, %v; want %q", out, err, ref)
	}
	_, _, err = runFake(t, f, args...)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("west unreachable: err = %v, want connection refused", err)
	}
	f.Cluster("west").Err = nil

	out, _, err = runFake(t, f, args...)
	if err != nil || out != ref+" created\n" {
		t.Fatalf("create: %q, %v", out, err)
	}
	out, _, err = runFake(t, f, append(args, "-o", "yaml")...)
	if err != nil {
		t.Fatal(err)
	}
	printed := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(out), &printed.Object); err != nil || printed.GetName() != "secrets" || printed.GetResourceVersion() == "" {
		t.Errorf("-o yaml printed the live object? %v\n%s", err, out)
	}

	var rule v1alpha1.ResourceSyncRule
	if err := f.Cluster("west").Client.Get(context.Background(), client.ObjectKey{Name: "secrets"}, &rule); err != nil {
		t.Fatal(err)
	}
	// What was written is what a client dry run prints.
	out, _, err = runFake(t, f, append(args, "--dry-run=client", "-o", "yaml")...)
	if err != nil {
		t.Fatal(err)
	}
	var want v1alpha1.ResourceSyncRule
	if err := yaml.UnmarshalStrict([]byte(out), &want); err != nil {
		t.Fatal(err)
	}
	if want.Spec.GVK.Kind != "Secret" || len(want.Spec.ClusterFeatureMatches) != 1 {
		t.Errorf("client dry run printed:\n%s", out)
	}
	if diff := cmp.Diff(want.Spec, rule.Spec); diff != "" {
		t.Errorf("rule on west (-want +got):\n%s", diff)
	}
	if err := f.Cluster("east").Client.Get(context.Background(), client.ObjectKey{Name: "secrets"}, &rule); err == nil {
		t.Error("the rule was written to east too")
	}
}
