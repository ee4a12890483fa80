package install_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/plugin/install"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/manager"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// bed has three clusters: cluster-a for install and re-install, cluster-b for --wait with
// a controller, cluster-c for what must write nothing (dry run, forbidden) and --wait
// without a controller.
var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Clusters: 3}, &bed))
}

// run runs "kubectl registry <args>" through a root command built like plugin/root.go:
// kubectl's kubeconfig flags are persistent flags of the root.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{install.NewCmdInstall}, Timeout: 3 * time.Minute}
	return cmd.Run(t, args...)
}

// needBed skips without the test binaries and returns the cluster and its admin client.
func needBed(t *testing.T, name string) (*testbed.Cluster, client.Client) {
	t.Helper()
	testbed.SkipIfNoAssets(t)
	if bed == nil {
		t.Fatal("test binaries are present but the test bed did not start")
	}
	cl := bed.Cluster(name)
	c, err := cl.Client()
	if err != nil {
		t.Fatal(err)
	}
	return cl, c
}

// kubeArgs selects a context of the bed's kubeconfig.
func kubeArgs(context string) []string {
	return []string{"--kubeconfig", bed.KubeconfigPath, "--context", context}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	plugintest.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// names returns "Kind namespace/name" of objs.
func names(objs []*unstructured.Unstructured) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	return out
}

func notFound(t *testing.T, c client.Client, obj client.Object, key client.ObjectKey) {
	t.Helper()
	err := c.Get(context.Background(), key, obj)
	if !apierrors.IsNotFound(err) {
		t.Errorf("%T %s: want not found, got %v", obj, key, err)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{"cluster name not a label", []string{"--cluster-name", "Bad_Name"}, []string{`invalid cluster name "Bad_Name"`, "RFC 1123"}},
		{"zero replicas", []string{"--replicas", "0"}, []string{"--replicas must be at least 1, got 0"}},
		{"replicas not a number", []string{"--replicas", "two"}, []string{"--replicas"}},
		{"http endpoint", []string{"--api-server-endpoint", "http://x"}, []string{"invalid API server endpoint", "scheme must be https"}},
		{"system namespace", []string{"--namespace", "kube-system"}, []string{`invalid namespace "kube-system"`}},
		{"bad namespace shorthand", []string{"-n", "Not_A_Label"}, []string{`invalid namespace "Not_A_Label"`}},
		{"unknown dry run", []string{"--dry-run", "maybe"}, []string{`--dry-run must be "none", "client" or "server", got "maybe"`}},
		{"wait with dry run", []string{"--wait", "--dry-run=client"}, []string{"--wait cannot be used with --dry-run"}},
		{"zero timeout", []string{"--timeout", "0s"}, []string{"--timeout must be positive"}},
		{"unknown output", []string{"-o", "table"}, []string{"--output", `"table"`}},
		{"argument", []string{"east"}, []string{`unexpected argument "east"`}},
		{"several at once", []string{"--cluster-name", "X", "--replicas", "0"}, []string{`invalid cluster name "X"`, "--replicas must be at least 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _, err := run(t, append([]string{"install"}, tt.args...)...)
			plugintest.WantExitCode(t, err, 2, append(tt.wantErr, "See 'kubectl registry install --help' for usage.")...)
			if stdout != "" {
				t.Errorf("stdout: %q", stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	stdout, _, err := run(t, "install", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Examples:", "--cluster-name", "--api-server-endpoint", "--dry-run", "--wait", "--timeout", "--image", "--replicas", "--monitoring", "-n, --namespace", "-o, --output", "cluster-admin"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("help lacks %q", s)
		}
	}
}

// writeKubeconfig writes a kubeconfig with one context, name, for cfg.
func writeKubeconfig(t *testing.T, name string, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUnreachableCluster(t *testing.T) {
	path := writeKubeconfig(t, "unreachable", &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "token"})
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stdout, _, err := run(t, "install", "--kubeconfig", path, "--context", "unreachable", "--cluster-name", "east")
	plugintest.WantExitCode(t, err, 2, "cannot reach the API server at https://127.0.0.1:1", `context "unreachable"`)
	if stdout != "" {
		t.Errorf("stdout: %q", stdout)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("install changed the kubeconfig")
	}
}

// TestInstall installs into cluster-a: a server-side dry run first (persisting
// nothing), then for real (every object created), again (every object unchanged), and
// with a changed flag (only the Deployment configured).
func TestInstall(t *testing.T) {
	_, c := needBed(t, "cluster-a")
	ctx := context.Background()
	kcBefore, err := os.ReadFile(bed.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"install", "--cluster-name", "east", "--api-server-endpoint", "east.example.com:6443"}, kubeArgs("cluster-a")...)

	t.Run("server dry run", func(t *testing.T) {
		stdout, stderr, err := run(t, append(args, "--dry-run=server")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		golden(t, "install-server-dry-run", stdout)
		if !strings.Contains(stderr, "namespace cluster-registry does not exist yet") {
			t.Errorf("stderr does not warn about the missing namespace: %q", stderr)
		}
		notFound(t, c, &corev1.Namespace{}, client.ObjectKey{Name: v1alpha1.DefaultNamespace})
		notFound(t, c, &apiextensionsv1.CustomResourceDefinition{}, client.ObjectKey{Name: "clusters.clusterregistry.k8s.cisco.com"})
	})

	t.Run("first install creates everything", func(t *testing.T) {
		stdout, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		golden(t, "install-created", stdout)
		if stderr != "" {
			t.Errorf("stderr: %q", stderr)
		}
		var dep appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.ControllerName}, &dep); err != nil {
			t.Fatal(err)
		}
		wantArgs := []string{"serve", "--leader-elect=true", "--namespace=cluster-registry", "--cluster-name=east",
			"--api-server-endpoint=https://east.example.com:6443", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"}
		if diff := cmp.Diff(wantArgs, dep.Spec.Template.Spec.Containers[0].Args); diff != "" {
			t.Errorf("controller args (-want +got):\n%s", diff)
		}
		if got := dep.Spec.Template.Spec.Containers[0].Image; got != manifests.DefaultImage {
			t.Errorf("image %q, want %q", got, manifests.DefaultImage)
		}
		if dep.ManagedFields[0].Manager != v1alpha1.FieldManager {
			t.Errorf("field manager %q, want %q", dep.ManagedFields[0].Manager, v1alpha1.FieldManager)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: "clusters.clusterregistry.k8s.cisco.com"}, &crd); err != nil {
			t.Fatal(err)
		}
		established := false
		for _, cond := range crd.Status.Conditions {
			established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
		}
		if !established {
			t.Errorf("install returned before the CRDs were established")
		}
	})

	t.Run("second install changes nothing", func(t *testing.T) {
		stdout, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		golden(t, "install-unchanged", stdout)
	})

	t.Run("server dry run of a change", func(t *testing.T) {
		stdout, stderr, err := run(t, append(args, "--replicas", "3", "--dry-run=server", "-o", "name")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		if !strings.Contains(stdout, "deployment.apps/cluster-registry-controller\n") || strings.Contains(stdout, "unchanged") {
			t.Errorf("-o name output:\n%s", stdout)
		}
		stdout, stderr, err = run(t, append(args, "--replicas", "3", "--dry-run=server")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			want := "unchanged (server dry run)"
			if strings.HasPrefix(line, "deployment.apps/") {
				want = "configured (server dry run)"
			}
			if !strings.HasSuffix(line, " "+want) {
				t.Errorf("line %q, want it to end with %q", line, want)
			}
		}
		var dep appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.ControllerName}, &dep); err != nil {
			t.Fatal(err)
		}
		if *dep.Spec.Replicas != 1 {
			t.Errorf("the server dry run changed the replicas to %d", *dep.Spec.Replicas)
		}
	})

	t.Run("a changed flag configures the Deployment only", func(t *testing.T) {
		stdout, stderr, err := run(t, append(args, "--replicas", "2", "--image", "example.com/kubectl-registry:test")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			want := "unchanged"
			if strings.HasPrefix(line, "deployment.apps/") {
				want = "configured"
			}
			if !strings.HasSuffix(line, " "+want) {
				t.Errorf("line %q, want it to end with %q", line, want)
			}
		}
		var dep appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.ControllerName}, &dep); err != nil {
			t.Fatal(err)
		}
		if *dep.Spec.Replicas != 2 || dep.Spec.Template.Spec.Containers[0].Image != "example.com/kubectl-registry:test" {
			t.Errorf("replicas %d, image %q", *dep.Spec.Replicas, dep.Spec.Template.Spec.Containers[0].Image)
		}
	})

	t.Run("-o yaml prints the objects as they are in the cluster", func(t *testing.T) {
		stdout, stderr, err := run(t, append(args, "-o", "yaml")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		objs, err := manifests.Decode([]byte(stdout))
		if err != nil {
			t.Fatalf("output is not YAML: %v\n%s", err, stdout)
		}
		want, err := manifests.Render(manifests.RenderOptions{ClusterName: "east"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(names(want), names(objs)); diff != "" {
			t.Errorf("objects (-want +got):\n%s", diff)
		}
		for _, o := range objs {
			if o.GetUID() == "" {
				t.Errorf("%s %s has no uid: not read from the cluster", o.GetKind(), o.GetName())
			}
			if len(o.GetManagedFields()) > 0 {
				t.Errorf("%s %s: managed fields printed without --show-managed-fields", o.GetKind(), o.GetName())
			}
		}
	})

	t.Run("--member-grants=none removes the members' default grant, all brings it back", func(t *testing.T) {
		grant := []struct {
			obj client.Object
			key client.ObjectKey
		}{
			{&rbacv1.ClusterRoleBinding{}, client.ObjectKey{Name: v1alpha1.MembersGrantName}},
			{&rbacv1.Role{}, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.MembersGrantName}},
			{&rbacv1.RoleBinding{}, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.MembersGrantName}},
		}
		stdout, stderr, err := run(t, append(args, "--member-grants=none")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		for _, want := range []string{
			"clusterrolebinding.rbac.authorization.k8s.io/cluster-registry-members deleted",
			"role.rbac.authorization.k8s.io/cluster-registry-members deleted",
			"rolebinding.rbac.authorization.k8s.io/cluster-registry-members deleted",
		} {
			if !strings.Contains(stdout, want+"\n") {
				t.Errorf("the output does not say %q:\n%s", want, stdout)
			}
		}
		for _, g := range grant {
			notFound(t, c, g.obj, g.key)
		}
		if stdout, _, err = run(t, append(args, "--member-grants=none")...); err != nil || strings.Contains(stdout, "deleted") {
			t.Errorf("a second install with none: %v\n%s", err, stdout)
		}
		if _, stderr, err := run(t, args...); err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		for _, g := range grant {
			if err := c.Get(ctx, g.key, g.obj); err != nil {
				t.Errorf("after install with the default grant: %v", err)
			}
		}
		_, _, err = run(t, append(args, "--member-grants=some")...)
		plugintest.WantExitCode(t, err, 2, `invalid member grants "some"`)
	})

	t.Run("another namespace is refused", func(t *testing.T) {
		stdout, _, err := run(t, append(args, "--namespace", "registry-two")...)
		plugintest.WantExitCode(t, err, 2, `the registry is already installed in namespace "cluster-registry"`, "--namespace cluster-registry")
		if stdout != "" {
			t.Errorf("stdout: %q", stdout)
		}
		notFound(t, c, &corev1.Namespace{}, client.ObjectKey{Name: "registry-two"})
	})

	kcAfter, err := os.ReadFile(bed.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kcBefore, kcAfter) {
		t.Errorf("install changed the kubeconfig")
	}
}

// TestNothingWritten runs on cluster-c what must not write: a client dry run (which
// does not even contact the cluster), an install as a user without rights, and then
// --wait without a controller, which installs but times out.
func TestNothingWritten(t *testing.T) {
	cl, c := needBed(t, "cluster-c")
	args := append([]string{"install", "--cluster-name", "west"}, kubeArgs("cluster-c")...)

	t.Run("client dry run -o yaml", func(t *testing.T) {
		stdout, stderr, err := run(t, append(args, "--dry-run=client", "-o", "yaml", "--namespace", "registry-dry-run")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		objs, err := manifests.Decode([]byte(stdout))
		if err != nil {
			t.Fatalf("output is not YAML: %v\n%s", err, stdout)
		}
		want, err := manifests.Render(manifests.RenderOptions{Namespace: "registry-dry-run", ClusterName: "west"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(toJSON(t, want), toJSON(t, objs)); diff != "" {
			t.Errorf("printed objects (-rendered +printed):\n%s", diff)
		}
		notFound(t, c, &corev1.Namespace{}, client.ObjectKey{Name: "registry-dry-run"})
		notFound(t, c, &apiextensionsv1.CustomResourceDefinition{}, client.ObjectKey{Name: "clusters.clusterregistry.k8s.cisco.com"})
	})

	t.Run("client dry run -o json is a List", func(t *testing.T) {
		stdout, stderr, err := run(t, append(args, "--dry-run=client", "-o", "json")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		var list unstructured.UnstructuredList
		if err := json.Unmarshal([]byte(stdout), &list.Object); err != nil {
			t.Fatalf("output is not one JSON document: %v", err)
		}
		objs, err := manifests.Objects()
		if err != nil {
			t.Fatal(err)
		}
		if items, _, _ := unstructured.NestedSlice(list.Object, "items"); len(items) != len(objs) || list.Object["kind"] != "List" {
			t.Errorf("want a List of %d objects (every manifest), got kind %v with %d items", len(objs), list.Object["kind"], len(items))
		}
	})

	t.Run("client dry run lines", func(t *testing.T) {
		stdout, stderr, err := run(t, append(args, "--dry-run=client")...)
		if err != nil {
			t.Fatalf("%v\nstderr: %s", err, stderr)
		}
		golden(t, "install-client-dry-run", stdout)
	})

	t.Run("forbidden", func(t *testing.T) {
		cfg, err := cl.ConfigFor("nobody", nil)
		if err != nil {
			t.Fatal(err)
		}
		path := writeKubeconfig(t, "nobody", cfg)
		stdout, _, err := run(t, "install", "--kubeconfig", path, "--cluster-name", "west")
		plugintest.WantExitCode(t, err, 2, "forbidden", `User "nobody"`, "cluster-admin")
		if stdout != "" {
			t.Errorf("stdout: %q", stdout)
		}
		notFound(t, c, &apiextensionsv1.CustomResourceDefinition{}, client.ObjectKey{Name: "clusters.clusterregistry.k8s.cisco.com"})
	})

	t.Run("wait without a controller times out", func(t *testing.T) {
		start := time.Now()
		stdout, stderr, err := run(t, append(args, "--wait", "--timeout", "3s")...)
		plugintest.WantExitCode(t, err, 2, "timed out after 3s", "the controller has not reported", `no Cluster "west"`,
			"deployment cluster-registry/cluster-registry-controller: 0/1 replicas available", "kubectl logs -n cluster-registry deployment/cluster-registry-controller")
		if elapsed := time.Since(start); elapsed > 30*time.Second {
			t.Errorf("took %s", elapsed)
		}
		if !strings.Contains(stdout, "namespace/cluster-registry created") {
			t.Errorf("stdout does not report the install:\n%s", stdout)
		}
		if !strings.Contains(stderr, `Waiting up to 3s for the controller to report Cluster "west" Ready...`) {
			t.Errorf("stderr has no progress:\n%s", stderr)
		}
	})
}

func toJSON(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	out := make([]string, len(objs))
	for i, o := range objs {
		b, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// testLogger logs through t.Log until the test ends.
func testLogger(t *testing.T) logr.Logger {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
	})
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Log(prefix, args)
		}
	}, funcr.Options{})
}

// TestWaitForController installs into cluster-b with --wait while a controller runs
// against it (out of cluster, as envtest runs no pods): install returns once the
// controller reports the local Cluster Ready.
func TestWaitForController(t *testing.T) {
	cl, c := needBed(t, "cluster-b")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("the controller did not stop")
		}
	})
	go func() {
		// The controller needs the CRDs and its namespace: start it once install made them.
		if err := waitInstalled(ctx, c); err != nil {
			done <- nil
			return
		}
		opts := manager.DefaultOptions()
		opts.ClusterName = "x"
		opts.MetricsBindAddress = manager.DisabledBindAddress
		opts.HealthProbeBindAddress = manager.DisabledBindAddress
		opts.Registry.LocalServer = cl.Host()
		opts.Registry.LocalCA = cl.CAData()
		opts.Logger = testLogger(t)
		done <- manager.Run(ctx, rest.CopyConfig(cl.Config), opts)
	}()

	stdout, stderr, err := run(t, append([]string{"install", "--cluster-name", "x", "--wait", "--timeout", "2m"}, kubeArgs("cluster-b")...)...)
	if err != nil {
		t.Fatalf("%v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	if !strings.Contains(stderr, `Cluster "x" is Ready`) {
		t.Errorf("stderr does not report the Cluster Ready:\n%s", stderr)
	}
	var cluster v1alpha1.Cluster
	if err := c.Get(context.Background(), client.ObjectKey{Name: "x"}, &cluster); err != nil {
		t.Fatal(err)
	}
	uid, err := cl.KubeSystemUID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cluster.Status.State != v1alpha1.ClusterStateReady || cluster.Spec.ClusterID != uid {
		t.Errorf("cluster x: state %q, clusterID %s (local %s)", cluster.Status.State, cluster.Spec.ClusterID, uid)
	}
}

// waitInstalled waits until the CRDs are established and the registry namespace exists.
func waitInstalled(ctx context.Context, c client.Client) error {
	for {
		ok := true
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.DefaultNamespace}, &ns); err != nil {
			ok = false
		}
		for _, name := range []string{"clusters", "clusterfeatures", "resourcesyncrules"} {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: name + ".clusterregistry.k8s.cisco.com"}, &crd); err != nil {
				ok = false
				break
			}
			est := false
			for _, cond := range crd.Status.Conditions {
				est = est || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
			}
			ok = ok && est
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
