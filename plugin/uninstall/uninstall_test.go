package uninstall_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/install"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/plugin/uninstall"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// bed has one cluster with its kube-controller-manager, which finishes namespace
// deletion.
var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Clusters: 1}, &bed))
}

// run runs "kubectl registry <args>" through a root command built like plugin/root.go.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{install.NewCmdInstall, uninstall.NewCmdUninstall}, Timeout: 3 * time.Minute}
	return cmd.Run(t, args...)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	plugintest.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// readersGone is how uninstall reports the readers namespace once it finished
// terminating; it holds nothing to finalize, so after an uninstall without --wait it may
// be gone or still terminating (reported deleted), depending on timing.
const readersGone = "namespace/cluster-registry-readers not found\n"

// terminatingReaders reports the readers namespace as still terminating.
func terminatingReaders(out string) string {
	return strings.Replace(out, readersGone, "namespace/cluster-registry-readers deleted\n", 1)
}

// terminatingNamespaces reports both namespaces as still terminating: after an earlier
// uninstall, the registry namespace too may have finished terminating or not, depending
// on timing (the namespace controller empties it).
func terminatingNamespaces(out string) string {
	return strings.Replace(terminatingReaders(out), "namespace/cluster-registry not found\n", "namespace/cluster-registry deleted\n", 1)
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{"namespace not a label", []string{"-n", "Bad_NS"}, []string{`invalid namespace "Bad_NS"`}},
		{"system namespace", []string{"--namespace", "kube-system"}, []string{`invalid namespace "kube-system"`}},
		{"unknown dry run", []string{"--dry-run", "maybe"}, []string{`--dry-run must be "none", "client" or "server", got "maybe"`}},
		{"wait with dry run", []string{"--wait", "--dry-run=client"}, []string{"--wait cannot be used with --dry-run"}},
		{"zero timeout", []string{"--timeout", "0s"}, []string{"--timeout must be positive"}},
		{"unsupported output", []string{"-o", "yaml"}, []string{`--output must be "name", got "yaml"`}},
		{"argument", []string{"now"}, []string{`unexpected argument "now"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _, err := run(t, append([]string{"uninstall"}, tt.args...)...)
			plugintest.WantExitCode(t, err, 2, append(tt.wantErr, "See 'kubectl registry uninstall --help' for usage.")...)
			if stdout != "" {
				t.Errorf("stdout: %q", stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	stdout, _, err := run(t, "uninstall", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Examples:", "--delete-crds", "deletes every Cluster, ClusterFeature and ResourceSyncRule", "--dry-run", "--wait", "--timeout", "-n, --namespace"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("help lacks %q", s)
		}
	}
}

func TestUnreachableCluster(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["unreachable"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.AuthInfos["unreachable"] = &clientcmdapi.AuthInfo{Token: "token"}
	kc.Contexts["unreachable"] = &clientcmdapi.Context{Cluster: "unreachable", AuthInfo: "unreachable"}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, "uninstall", "--kubeconfig", path, "--context", "unreachable")
	plugintest.WantExitCode(t, err, 2, "cannot reach the API server at https://127.0.0.1:1", `context "unreachable"`)
}

func exists(t *testing.T, c client.Client, obj client.Object, name string) bool {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestUninstall installs and uninstalls the registry on a real cluster: the namespace and
// RBAC go, the CRDs and registry objects stay unless --delete-crds.
func TestUninstall(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	if bed == nil {
		t.Fatal("test binaries are present but the test bed did not start")
	}
	c, err := bed.Clusters[0].Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kube := []string{"--kubeconfig", bed.KubeconfigPath, "--context", bed.Clusters[0].Name}
	uninstallArgs := append([]string{"uninstall"}, kube...)
	installArgs := append([]string{"install", "--cluster-name", "east"}, kube...)
	crd := "clusters.clusterregistry.k8s.cisco.com"

	t.Run("nothing installed", func(t *testing.T) {
		stdout, stderr, err := run(t, uninstallArgs...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		golden(t, "uninstall-nothing-installed", stdout)
	})

	if stdout, stderr, err := run(t, installArgs...); err != nil {
		t.Fatalf("install: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	// A registry object that must survive an uninstall without --delete-crds.
	keep := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "keep-me"}, Spec: v1alpha1.ClusterSpec{ClusterID: "0a3c5a6e-2f0c-4c3b-9d5e-6f7a8b9c0d1e"}}
	if err := c.Create(ctx, keep); err != nil {
		t.Fatal(err)
	}

	t.Run("client dry run deletes nothing", func(t *testing.T) {
		stdout, stderr, err := run(t, append(uninstallArgs, "--dry-run=client")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		golden(t, "uninstall-client-dry-run", stdout)
		if !exists(t, c, &corev1.Namespace{}, v1alpha1.DefaultNamespace) || !exists(t, c, &rbacv1.ClusterRole{}, v1alpha1.ControllerName) {
			t.Errorf("the dry run deleted something")
		}
	})

	t.Run("another namespace is refused", func(t *testing.T) {
		_, _, err := run(t, append(uninstallArgs, "-n", "elsewhere")...)
		plugintest.WantExitCode(t, err, 2, `the registry is installed in namespace "cluster-registry", not "elsewhere"`)
		if !exists(t, c, &rbacv1.ClusterRole{}, v1alpha1.ControllerName) {
			t.Errorf("the refused uninstall deleted something")
		}
	})

	t.Run("uninstall --wait keeps the CRDs", func(t *testing.T) {
		start := time.Now()
		stdout, stderr, err := run(t, append(uninstallArgs, "--wait")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		t.Logf("uninstall --wait took %s; stderr:\n%s", time.Since(start).Round(time.Millisecond), stderr)
		golden(t, "uninstall", stdout)
		if !strings.Contains(stderr, "namespace/cluster-registry is gone") {
			t.Errorf("stderr has no progress:\n%s", stderr)
		}
		if exists(t, c, &corev1.Namespace{}, v1alpha1.DefaultNamespace) {
			t.Errorf("the namespace still exists after --wait")
		}
		for _, name := range []string{v1alpha1.ControllerName, v1alpha1.ReaderName, v1alpha1.ControllerAggregatedRoleName, v1alpha1.ReaderAggregatedRoleName} {
			if exists(t, c, &rbacv1.ClusterRole{}, name) {
				t.Errorf("ClusterRole %s still exists", name)
			}
		}
		if !exists(t, c, &apiextensionsv1.CustomResourceDefinition{}, crd) {
			t.Errorf("CRD %s was deleted without --delete-crds", crd)
		}
		if !exists(t, c, &v1alpha1.Cluster{}, "keep-me") {
			t.Errorf("Cluster keep-me was deleted without --delete-crds")
		}
	})

	t.Run("--wait is bounded by --timeout", func(t *testing.T) {
		if stdout, stderr, err := run(t, installArgs...); err != nil {
			t.Fatalf("install: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
		}
		start := time.Now()
		_, _, err := run(t, append(uninstallArgs, "--wait", "--timeout", "1s")...)
		plugintest.WantExitCode(t, err, 2, "timed out after 1s", "still present: ", "namespace/cluster-registry (terminating")
		if elapsed := time.Since(start); elapsed > 15*time.Second {
			t.Errorf("uninstall --wait --timeout 1s took %s", elapsed)
		}
		// Again while the namespace is terminating: it is reported deleted, the rest not found.
		stdout, stderr, err := run(t, append(uninstallArgs, "--wait")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		golden(t, "uninstall-terminating", terminatingReaders(stdout))
		if exists(t, c, &corev1.Namespace{}, v1alpha1.DefaultNamespace) {
			t.Errorf("the namespace still exists after --wait")
		}
	})

	t.Run("without --wait the aggregated ClusterRoles stay deleted", func(t *testing.T) {
		if stdout, stderr, err := run(t, installArgs...); err != nil {
			t.Fatalf("install: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
		}
		if stdout, stderr, err := run(t, uninstallArgs...); err != nil {
			t.Fatalf("%v\nstdout: %s\nstderr: %s", err, stdout, stderr)
		}
		// kube-controller-manager's aggregation controller must not bring them back.
		time.Sleep(3 * time.Second)
		for _, name := range []string{v1alpha1.ControllerName, v1alpha1.ReaderName, v1alpha1.ControllerAggregatedRoleName, v1alpha1.ReaderAggregatedRoleName} {
			if exists(t, c, &rbacv1.ClusterRole{}, name) {
				t.Errorf("ClusterRole %s exists again", name)
			}
		}
	})

	t.Run("--delete-crds", func(t *testing.T) {
		// --timeout below the command's 3 minutes: a CRD that does not go away fails
		// with the command's own message, which names it and its state.
		start := time.Now()
		stdout, stderr, err := run(t, append(uninstallArgs, "--delete-crds", "--wait", "--timeout", "2m")...)
		t.Logf("uninstall --delete-crds --wait took %s; stderr:\n%s", time.Since(start).Round(time.Millisecond), stderr)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		golden(t, "uninstall-delete-crds", terminatingNamespaces(stdout))
		for _, name := range []string{"clusters", "clusterfeatures", "resourcesyncrules"} {
			if exists(t, c, &apiextensionsv1.CustomResourceDefinition{}, name+".clusterregistry.k8s.cisco.com") {
				t.Errorf("CRD %s still exists", name)
			}
		}
	})

	t.Run("--delete-crds --wait is bounded when a CRD cannot go", func(t *testing.T) {
		if stdout, stderr, err := run(t, installArgs...); err != nil {
			t.Fatalf("install: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
		}
		// A finalizer no controller removes keeps the Clusters CRD terminating.
		held := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}, Spec: v1alpha1.ClusterSpec{ClusterID: "5b0c7d1e-3a2f-4e6b-8c9d-0e1f2a3b4c5d"}}
		if err := c.Create(ctx, held); err != nil {
			t.Fatal(err)
		}
		release := func() {
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
			if err := c.Patch(ctx, held, patch); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("releasing Cluster held: %v", err)
			}
		}
		defer release()
		start := time.Now()
		_, stderr, err := run(t, append(uninstallArgs, "--delete-crds", "--wait", "--timeout", "5s")...)
		plugintest.WantExitCode(t, err, 2, "timed out after 5s",
			"still present: customresourcedefinition.apiextensions.k8s.io/clusters.clusterregistry.k8s.cisco.com (terminating")
		if elapsed := time.Since(start); elapsed > 20*time.Second {
			t.Errorf("uninstall --delete-crds --wait --timeout 5s took %s", elapsed)
		}
		t.Logf("stderr:\n%s", stderr)
		release()
		deadline := time.Now().Add(2 * time.Minute)
		for exists(t, c, &apiextensionsv1.CustomResourceDefinition{}, crd) {
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s still exists 2 minutes after its last object was released", crd)
			}
			time.Sleep(time.Second)
		}
	})
}
