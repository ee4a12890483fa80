package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// TestMain quiets controller-runtime's process-wide logger, which the test bed's clients
// log through (unset, it prints a warning with a stack trace), as testbed.Main does. The
// bed itself is started by the one test that needs it, so the others run without it.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// TestInstallPathsFormAGroup installs the registry three ways on three test API servers,
// as docs/install.md says: the chart with Helm's library (kubectl create namespace
// cluster-registry; helm install --namespace cluster-registry --take-ownership),
// `kubectl registry install`, and an overlay of the kustomize base with the test bed's
// kubectl (kubectl apply --server-side -k). It runs each cluster's controller with the
// arguments of the Deployment its installer made, as the ServiceAccount that Deployment
// runs as (envtest runs no pods: the controller is a process holding the token a pod of
// the Deployment would, so the RBAC each installer made is what it has), joins the
// clusters with `kubectl registry join` and waits until each sees all three Ready.
func TestInstallPathsFormAGroup(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bed, err := testbed.Start(ctx, testbed.Options{Names: []string{"by-helm", "by-install", "by-kustomize"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bed.Stop(); err != nil {
			t.Errorf("stopping the test bed: %v", err)
		}
	})
	byHelm, byInstall, byKustomize := bed.Cluster("by-helm"), bed.Cluster("by-install"), bed.Cluster("by-kustomize")

	helmClient, err := byHelm.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := helmClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultNamespace}}); err != nil {
		t.Fatal(err)
	}
	helmInstall(ctx, t, bed.KubeconfigPath, byHelm.Name, map[string]any{
		"clusterName":       byHelm.Name,
		"apiServerEndpoint": byHelm.Host(),
	})
	if _, stderr, err := runRegistry(ctx, "install", "--kubeconfig", bed.KubeconfigPath, "--context", byInstall.Name,
		"--cluster-name", byInstall.Name, "--api-server-endpoint", byInstall.Host()); err != nil {
		t.Fatalf("kubectl registry install: %v\n%s", err, stderr)
	}
	applyKustomize(ctx, t, bed.KubeconfigPath, byKustomize)

	clients := map[string]client.Client{}
	for _, c := range []*testbed.Cluster{byHelm, byInstall, byKustomize} {
		cl, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		clients[c.Name] = cl
		serveAsDeployment(ctx, t, c, cl)
	}
	for name, cl := range clients {
		harness.Eventually(t, 90*time.Second, name+" bootstraps", func() error { return harness.LocalReady(cl, name) })
	}

	for _, peer := range []*testbed.Cluster{byInstall, byKustomize} {
		if stdout, stderr, err := runRegistry(ctx, "join", "--kubeconfig", bed.KubeconfigPath, "--context", byHelm.Name,
			"--peer-context", peer.Name, "--allow-loopback", "--wait", "--timeout", "2m"); err != nil {
			t.Fatalf("kubectl registry join %s: %v\nstdout: %s\nstderr: %s", peer.Name, err, stdout, stderr)
		}
	}
	formed := func() error {
		for name, cl := range clients {
			if err := harness.Members(cl, name, byHelm.Name, byInstall.Name, byKustomize.Name); err != nil {
				return err
			}
		}
		return nil
	}
	harness.Eventually(t, 90*time.Second, "the group forms", formed)

	// helm upgrade changes a knob as install run again does: memberGrants=none removes
	// the members' default grant (install --member-grants none deletes it), and the group
	// stays as it is.
	helmUpgrade(ctx, t, bed.KubeconfigPath, byHelm.Name, map[string]any{
		"clusterName":       byHelm.Name,
		"apiServerEndpoint": byHelm.Host(),
		"memberGrants":      "none",
	})
	var grant rbacv1.ClusterRoleBinding
	if err := helmClient.Get(ctx, client.ObjectKey{Name: v1alpha1.MembersGrantName}, &grant); !apierrors.IsNotFound(err) {
		t.Errorf("after helm upgrade with memberGrants=none, ClusterRoleBinding %s: %v, want it gone", v1alpha1.MembersGrantName, err)
	}
	harness.Eventually(t, 30*time.Second, "the group stays formed", formed)
}

// helmConfig returns Helm's configuration for the cluster of kubeconfig's context, the
// release in the registry namespace.
func helmConfig(t *testing.T, kubeconfig, context string) *action.Configuration {
	t.Helper()
	ns := v1alpha1.DefaultNamespace
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Context, flags.Namespace = &kubeconfig, &context, &ns
	// Helm's debug log, shown when the test fails.
	var log strings.Builder
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("helm's log:\n%s", log.String())
		}
	})
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", func(format string, v ...any) { fmt.Fprintf(&log, format+"\n", v...) }); err != nil {
		t.Fatalf("helm: %v", err)
	}
	return cfg
}

// helmInstall installs the committed chart into the cluster of kubeconfig's context as
// `helm install kubectl-registry <chart> --namespace cluster-registry --take-ownership`
// does.
func helmInstall(ctx context.Context, t *testing.T, kubeconfig, context string, vals map[string]any) {
	t.Helper()
	install := action.NewInstall(helmConfig(t, kubeconfig, context))
	install.ReleaseName = ChartName
	install.Namespace = v1alpha1.DefaultNamespace
	install.TakeOwnership = true
	install.Timeout = 2 * time.Minute
	rel, err := install.RunWithContext(ctx, loadChart(t), vals)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if rel.Info.Status != release.StatusDeployed {
		t.Fatalf("helm install: release %s is %s", rel.Name, rel.Info.Status)
	}
}

// helmUpgrade upgrades the release helmInstall made to vals, as `helm upgrade
// kubectl-registry <chart> --namespace cluster-registry` does.
func helmUpgrade(ctx context.Context, t *testing.T, kubeconfig, context string, vals map[string]any) {
	t.Helper()
	upgrade := action.NewUpgrade(helmConfig(t, kubeconfig, context))
	upgrade.Namespace = v1alpha1.DefaultNamespace
	upgrade.Timeout = 2 * time.Minute
	rel, err := upgrade.RunWithContext(ctx, ChartName, loadChart(t), vals)
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if rel.Info.Status != release.StatusDeployed || rel.Version != 2 {
		t.Fatalf("helm upgrade: release %s is %s at version %d", rel.Name, rel.Info.Status, rel.Version)
	}
}

// applyKustomize applies an overlay of the kustomize base that names cluster c and
// advertises its address, as docs/install.md shows, with the test bed's kubectl.
func applyKustomize(ctx context.Context, t *testing.T, kubeconfig string, c *testbed.Cluster) {
	t.Helper()
	assets, _ := testbed.Assets()
	dir := writeOverlay(t, fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- https://github.com/kubectl-registry/kubectl-registry//manifests/kustomize?ref=v0.1.0
patches:
- target:
    kind: Deployment
    name: cluster-registry-controller
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/3
      value: --cluster-name=%s
    - op: add
      path: /spec/template/spec/containers/0/args/4
      value: --api-server-endpoint=%s
`, c.Name, c.Host()))
	cmd := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "apply", "--server-side", "-k", dir,
		"--kubeconfig", kubeconfig, "--context", c.Name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply --server-side -k: %v\n%s", err, out)
	}
}

// runRegistry runs `kubectl registry <args>` in this process.
func runRegistry(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := newRegistryCmd(&out, &errOut)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// serveAsDeployment runs the controller of cluster c out of cluster with the arguments of
// the controller's Deployment there (but the bind addresses, which the tests of other
// packages may hold) and with a token of the Deployment's ServiceAccount, and stops it
// when the test ends.
func serveAsDeployment(ctx context.Context, t *testing.T, c *testbed.Cluster, cl client.Client) {
	t.Helper()
	var d appsv1.Deployment
	if err := cl.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.ControllerName}, &d); err != nil {
		t.Fatalf("%s: the controller's Deployment: %v", c.Name, err)
	}
	pod := d.Spec.Template.Spec
	var args []string
	for _, container := range pod.Containers {
		if container.Name == "controller" {
			args = container.Args
		}
	}
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("%s: the controller's container runs %q, want serve", c.Name, args)
	}
	var kept []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--metrics-bind-address") && !strings.HasPrefix(a, "--health-probe-bind-address") {
			kept = append(kept, a)
		}
	}

	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(d.Namespace).CreateToken(ctx, pod.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: a token of ServiceAccount %s: %v", c.Name, pod.ServiceAccountName, err)
	}
	dir := t.TempDir()
	direct := c.DirectConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[c.Name] = &clientcmdapi.Cluster{Server: direct.Host, CertificateAuthorityData: c.CAData()}
	kc.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name, Namespace: d.Namespace}
	kc.CurrentContext = c.Name
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, c.CAData(), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	kept = append(kept, "--kubeconfig", kubeconfig, "--api-server-ca-file", ca,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--allow-loopback-peers",
		"--peer-health-interval", "300ms", "--peer-failure-threshold", "3")
	cmd := exec.Command(harness.Binary(t), kept...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the controller of %s exited with %v after SIGTERM", c.Name, err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("the controller of %s did not stop within 30s of SIGTERM", c.Name)
		}
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			lines := strings.Split(string(data), "\n")
			t.Logf("log of the controller of %s (the Deployment's arguments %q):\n%s", c.Name, args, strings.Join(lines[max(0, len(lines)-80):], "\n"))
		}
		_ = log.Close()
	})
}
