package edit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
)

func newOptions() *Options { return NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard()) }

// TestComplete takes TYPE and NAME as two arguments or as TYPE/NAME.
func TestComplete(t *testing.T) {
	for _, tt := range []struct {
		args               []string
		wantType, wantName string
	}{
		{[]string{"rsr", "my-rule"}, "rsr", "my-rule"},
		{[]string{"cf/gpu"}, "cf", "gpu"},
	} {
		o := newOptions()
		if err := o.Complete(&cobra.Command{}, tt.args); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{tt.wantType, tt.wantName}, []string{o.Type, o.Name}); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestValidate(t *testing.T) {
	plugintest.RunValidate(t, newOptions, []plugintest.ValidateCase[*Options]{
		{Name: "rule", Modify: func(o *Options) { o.Type, o.Name = "rsr", "r" }},
		{Name: "feature, two contexts", Modify: func(o *Options) { o.Type, o.Name, o.Contexts = "ClusterFeatures", "f", []string{"a", "b"} }},
		{Name: "cluster", Modify: func(o *Options) { o.Type, o.Name = "cluster", "c" }, Want: []string{"Clusters cannot be edited"}},
		{Name: "unknown type", Modify: func(o *Options) { o.Type, o.Name = "pod", "p" }, Want: []string{`unknown TYPE "pod"`}},
		{Name: "bad name", Modify: func(o *Options) { o.Type, o.Name = "rsr", "Bad Name" }, Want: []string{`invalid NAME "Bad Name"`}},
		{Name: "context twice", Modify: func(o *Options) { o.Type, o.Name, o.Contexts = "rsr", "r", []string{"a", "a"} }, Want: []string{`context "a" named twice`}},
		{Name: "timeout", Modify: func(o *Options) { o.Type, o.Name, o.Timeout = "rsr", "r", 0 }, Want: []string{"timeout must be positive"}},
	})
}
