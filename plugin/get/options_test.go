package get

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
)

func getCmd(args ...string) *cobra.Command {
	cmd := &cobra.Command{Use: "get"}
	cmd.Flags().String("context", "", "")
	cmd.Flags().StringP("namespace", "n", "", "")
	if err := cmd.ParseFlags(args); err != nil {
		panic(err)
	}
	return cmd
}

// TestComplete reads the resources, the contexts and their namespaces from the flags
// and an in-memory kubeconfig.
func TestComplete(t *testing.T) {
	tests := []struct {
		name          string
		flags, args   []string
		contexts      []string
		wantResources []string
		wantTargets   []target
		wantErr       string
	}{
		{name: "every context, collection", args: []string{"workloads"},
			wantResources: []string{"deployments.apps", "daemonsets.apps", "statefulsets.apps"},
			wantTargets:   []target{{"a", "default"}, {"b", "default"}, {"c", "default"}}},
		{name: "--contexts and -n", flags: []string{"-n", "prod"}, args: []string{"cm,secrets", "x"}, contexts: []string{"c", "a", "c"},
			wantResources: []string{"cm", "secrets"},
			wantTargets:   []target{{"c", "prod"}, {"a", "prod"}}},
		{name: "--context", flags: []string{"--context", "b"}, args: []string{"cm"},
			wantResources: []string{"cm"}, wantTargets: []target{{"b", "default"}}},
		{name: "--context and --contexts", flags: []string{"--context", "b"}, args: []string{"cm"}, contexts: []string{"a"}, wantErr: "--context and --contexts cannot be used together"},
		{name: "unknown context", args: []string{"cm"}, contexts: []string{"zz"}, wantErr: `--contexts: context "zz" not found in the kubeconfig`},
		{name: "bad sort-by", flags: nil, args: []string{"cm"}, wantErr: "--sort-by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard())
			o.Factory = kubefake.New([]string{"a", "b", "c"})
			o.Contexts = tt.contexts
			if tt.name == "bad sort-by" {
				o.SortBy = ".metadata.name["
			}
			err := o.Complete(getCmd(tt.flags...), tt.args)
			if !plugintest.WantErr(t, err, tt.wantErr) {
				return
			}
			if diff := cmp.Diff(tt.wantResources, o.resources); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTargets, o.targets, cmp.AllowUnexported(target{})); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Options)
		want   string
	}{
		{name: "valid", modify: func(*Options) {}},
		{name: "no resource", modify: func(o *Options) { o.resources = nil }, want: "you must specify the type of resource to get"},
		{name: "negative limit", modify: func(o *Options) { o.Limit = -1 }, want: "--limit must not be negative, got -1"},
		{name: "cluster timeout", modify: func(o *Options) { o.ClusterTimeout = 0 }, want: "--cluster-timeout must be positive"},
		{name: "name and selector", modify: func(o *Options) { o.names = []string{"x"}; o.LabelSelector = "a=b" }, want: "name cannot be provided when a selector is specified"},
		{name: "name across namespaces", modify: func(o *Options) { o.names = []string{"x"}; o.AllNamespaces = true }, want: "a resource cannot be retrieved by name across all namespaces"},
		{name: "no context", modify: func(o *Options) { o.targets = nil }, want: "the kubeconfig has no context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard())
			o.resources = []string{"cm"}
			o.targets = []target{{"a", "default"}}
			tt.modify(o)
			err := o.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}
