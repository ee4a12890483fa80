package create

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
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

// TestRunFeatureFake creates a feature in an in-memory cluster, then finds it unchanged;
// a server dry run writes nothing.
func TestRunFeatureFake(t *testing.T) {
	f := kubefake.New([]string{"east"})
	run := func(dryRun, featureName string) string {
		t.Helper()
		streams, _, out, _ := genericiooptions.NewTestIOStreams()
		o := NewFeatureOptions(nil, streams)
		o.Factory = f
		o.FeatureName = featureName
		cmd := &cobra.Command{}
		cmd.Flags().String("context", "", "")
		cmdutil.AddDryRunFlag(cmd, "")
		if err := cmd.Flags().Set("dry-run", dryRun); err != nil {
			t.Fatal(err)
		}
		if err := o.Complete(cmd, []string{"gpu"}); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := o.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return out.String()
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
