package cmdutil

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestContextOverrides(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want clientcmd.ConfigOverrides
	}{
		{name: "no flags", want: clientcmd.ConfigOverrides{CurrentContext: "b"}},
		{name: "timeout and impersonation", args: []string{"--request-timeout=5s", "--as=alice", "--as-uid=42", "--as-group=ops", "--as-group=dev"},
			want: clientcmd.ConfigOverrides{CurrentContext: "b", Timeout: "5s",
				AuthInfo: clientcmdapi.AuthInfo{Impersonate: "alice", ImpersonateUID: "42", ImpersonateGroups: []string{"ops", "dev"}}}},
		{name: "another context's cluster and user flags are not applied", args: []string{"--server=https://x", "--token=t", "--context=a"},
			want: clientcmd.ConfigOverrides{CurrentContext: "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := genericclioptions.NewConfigFlags(true)
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			flags.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got := ContextOverrides(flags, "b")
			if diff := cmp.Diff(tc.want, *got, cmp.AllowUnexported(clientcmdapi.AuthInfo{})); diff != "" {
				t.Errorf("overrides (-want +got):\n%s", diff)
			}
		})
	}
	// A getter that is not the root's flags adds only the context.
	if got := ContextOverrides(nil, "b"); got.CurrentContext != "b" || got.Timeout != "" {
		t.Errorf("ContextOverrides(nil) = %+v", got)
	}
}
