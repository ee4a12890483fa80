package uninstall

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestValidate checks the flags without I/O.
func TestValidate(t *testing.T) {
	tests := []plugintest.ValidateCase[*Options]{
		{Name: "defaults", Modify: func(*Options) {}},
		{Name: "client dry run, names", Modify: func(o *Options) { o.DryRun = cmdutil.DryRunClient; o.Output = "name" }},
		{Name: "namespace empty", Modify: func(o *Options) { o.Namespace = "" }, Want: []string{"--namespace must not be empty"}},
		{Name: "namespace invalid", Modify: func(o *Options) { o.Namespace = "Not_Valid" }, Want: []string{"Not_Valid"}},
		{Name: "wait with dry run", Modify: func(o *Options) { o.Wait = true; o.DryRun = cmdutil.DryRunServer }, Want: []string{"--wait cannot be used with --dry-run"}},
		{Name: "timeout", Modify: func(o *Options) { o.Timeout = 0 }, Want: []string{"--timeout must be positive"}},
		{Name: "output", Modify: func(o *Options) { o.Output = "yaml" }, Want: []string{`--output must be "name", got "yaml"`}},
	}
	plugintest.RunValidate(t, func() *Options { return NewOptions(nil, genericiooptions.NewTestIOStreamsDiscard()) }, tests)
}

// TestRunFake uninstalls from an in-memory cluster holding the namespace and the
// controller's Deployment: a client dry run reports and deletes nothing, a real run
// deletes them and reports the rest not found, and a cluster installed in another
// namespace is refused.
func TestRunFake(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultNamespace}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.ControllerName}}
	f := kubefake.New([]string{"east"}, ns, deploy)
	c := f.Cluster("east").Client

	run := func(dryRun string) (string, error) {
		t.Helper()
		streams, _, out, _ := genericiooptions.NewTestIOStreams()
		err := plugintest.RunVerb(t, NewCmdUninstall(f, streams), "-o", "name", "--dry-run="+dryRun)
		return out.String(), err
	}
	exists := func() bool {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(deploy), &appsv1.Deployment{})
		return err == nil
	}
	want := "deployment.apps/" + v1alpha1.ControllerName + "\nnamespace/" + v1alpha1.DefaultNamespace + "\n"

	out, err := run("client")
	if err != nil {
		t.Fatal(err)
	}
	if out != want {
		t.Errorf("client dry run printed %q, want %q", out, want)
	}
	if !exists() {
		t.Fatal("a client dry run deleted the Deployment")
	}

	out, err = run("none")
	if err != nil {
		t.Fatal(err)
	}
	if out != want {
		t.Errorf("uninstall printed %q, want %q", out, want)
	}
	if exists() {
		t.Error("the Deployment is still there")
	}

	out, err = run("none")
	if err != nil || out != "" {
		t.Errorf("second uninstall: %q, %v; want nothing deleted", out, err)
	}
}
