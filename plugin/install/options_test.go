package install

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
)

// TestValidate checks the flags without I/O.
func TestValidate(t *testing.T) {
	tests := []plugintest.ValidateCase[*Options]{
		{Name: "defaults", Modify: func(*Options) {}},
		{Name: "named, client dry run, yaml", Modify: func(o *Options) {
			o.Render.ClusterName = "east"
			o.DryRun = cmdutil.DryRunClient
			*o.PrintFlags.OutputFormat = "yaml"
		}},
		{Name: "replicas", Modify: func(o *Options) { o.Render.Replicas = 0 }, Want: []string{"--replicas must be at least 1, got 0"}},
		{Name: "namespace", Modify: func(o *Options) { o.Render.Namespace = "" }, Want: []string{"--namespace must not be empty"}},
		{Name: "image", Modify: func(o *Options) { o.Render.Image = "" }, Want: []string{"--image must not be empty"}},
		{Name: "cluster name", Modify: func(o *Options) { o.Render.ClusterName = "Not_A_Label" }, Want: []string{"Not_A_Label"}},
		{Name: "wait with dry run", Modify: func(o *Options) { o.Wait = true; o.DryRun = cmdutil.DryRunServer }, Want: []string{"--wait cannot be used with --dry-run"}},
		{Name: "timeout", Modify: func(o *Options) { o.Timeout = -1 }, Want: []string{"--timeout must be positive"}},
		{Name: "output", Modify: func(o *Options) { *o.PrintFlags.OutputFormat = "foo" }, Want: []string{`--output: unable to match a printer suitable for the output format "foo"`}},
	}
	plugintest.RunValidate(t, func() *Options { return NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard()) }, tests)
}

// TestRunDryRunFake runs install's dry runs against an in-memory cluster: the client dry
// run contacts no cluster, the server dry run reports every object as the API server
// would and writes nothing.
func TestRunDryRunFake(t *testing.T) {
	objs, err := manifests.Render(manifests.RenderOptions{Namespace: "cluster-registry", ClusterName: "east", Image: manifests.DefaultImage, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, obj := range objs {
		want.WriteString(apiRef(obj.GetKind(), obj.GroupVersionKind().Group, obj.GetName()) + " %s\n")
	}
	for _, tt := range []struct {
		dryRun, outcome string
		unreachable     bool
	}{
		{dryRun: "client", outcome: "serverside-applied (dry run)", unreachable: true},
		{dryRun: "server", outcome: "created (server dry run)"},
	} {
		t.Run(tt.dryRun, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			f := kubefake.New([]string{"east"}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "uid-east"}})
			if tt.unreachable {
				f.Cluster("east").Err = context.DeadlineExceeded
			}
			if err := plugintest.RunVerb(t, NewCmdInstall(f, streams), "--cluster-name", "east", "--dry-run="+tt.dryRun); err != nil {
				t.Fatalf("Run: %v\nstderr: %s", err, errOut)
			}
			if diff := cmp.Diff(strings.ReplaceAll(want.String(), "%s", tt.outcome), out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if tt.dryRun == "server" {
				if !strings.Contains(errOut.String(), "namespace cluster-registry does not exist yet") {
					t.Errorf("stderr %q does not warn of the missing namespace", errOut)
				}
				var list corev1.NamespaceList
				if err := f.Cluster("east").Client.List(context.Background(), &list); err != nil {
					t.Fatal(err)
				}
				if len(list.Items) != 1 {
					t.Errorf("a server dry run wrote namespaces: %v", list.Items)
				}
			}
		})
	}
}

// TestRunFakeUnreachable: an unreachable cluster is named in the error, and nothing is
// printed.
func TestRunFakeUnreachable(t *testing.T) {
	f := kubefake.New(nil)
	f.AddWithFuncs("east", interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("dial tcp: connection refused")
		},
	})
	f.Current = "east"
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	err := plugintest.RunVerb(t, NewCmdInstall(f, streams), "--cluster-name", "east")
	if err == nil || !strings.Contains(err.Error(), `cannot reach the API server at https://east.example:6443 (context "east"): dial tcp: connection refused`) {
		t.Errorf("err = %v", err)
	}
	if out.Len() > 0 {
		t.Errorf("stdout %q", out)
	}
}

func apiRef(kind, group, name string) string {
	ref := strings.ToLower(kind)
	if group != "" {
		ref += "." + group
	}
	return ref + "/" + name
}
