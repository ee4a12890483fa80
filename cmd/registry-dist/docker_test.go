package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/manifests/serverside"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// The controller's identity in the manifests (rbac-controller.yaml).
const (
	controllerServiceAccount = "cluster-registry-controller"
	serviceAccountDir        = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// skipWithoutDocker skips the test unless a Docker engine answers.
func skipWithoutDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine (docker info: %v): %s", err, lastLines(out, 3))
	}
}

// docker runs a docker command and returns its standard output.
func docker(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestImageServesInDocker proves "serve in a pod": it builds the image from this source as
// `make image` does, loads it into Docker and runs it as the Deployment would, with an
// in-cluster configuration (KUBERNETES_SERVICE_HOST/PORT and a service account token and
// CA at /var/run/secrets/kubernetes.io/serviceaccount) for the controller's
// ServiceAccount of the installed manifests, on a real API server. The local Cluster must
// appear and become Ready. It skips without Docker or the test binaries.
func TestImageServesInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	skipWithoutDocker(t)
	testbed.SkipIfNoAssets(t)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// The image, from a static linux binary of this source for this machine's arch.
	binary := filepath.Join(dir, "kubectl-registry")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", binary, "./cmd/kubectl-registry")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the linux binary: %v\n%s", err, out)
	}
	suffix := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	tag := "kubectl-registry-e2e:" + suffix
	tarballPath := filepath.Join(dir, "image.tar")
	if err := writeImage(imageOptions{Binary: binary, Arch: runtime.GOARCH, Version: "e2e", Tag: tag}, tarballPath, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := docker(ctx, "load", "-i", tarballPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = docker(context.Background(), "rmi", "-f", tag) })

	// A real API server with the registry installed, as `kubectl registry install` does.
	// envtest logs through controller-runtime's process-wide logger, which warns with a
	// stack trace when it is never set (testbed.Main sets it; this test starts its own bed).
	ctrllog.SetLogger(logr.Discard())
	bed, err := testbed.Start(ctx, testbed.Options{Clusters: 1, CRDDirectoryPaths: []string{"../../manifests/crds"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bed.Stop(); err != nil {
			t.Errorf("stopping the test bed: %v", err)
		}
	})
	cluster := bed.Clusters[0]
	c, err := cluster.Client()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serverside.Apply(ctx, c, v1alpha1.FieldManager, objs); err != nil {
		t.Fatalf("installing the manifests: %v", err)
	}
	// The controller's own rules are bound to it directly (cluster-registry-controller-own):
	// nothing waits for kube-controller-manager's aggregation.

	// The pod's service account files: a bound token of the controller's ServiceAccount.
	cs, err := cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(v1alpha1.DefaultNamespace).CreateToken(ctx, controllerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", controllerServiceAccount, err)
	}
	root := filepath.Join(dir, "root")
	sa := filepath.Join(root, serviceAccountDir)
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"token":     []byte(tr.Status.Token),
		"ca.crt":    cluster.CAData(),
		"namespace": []byte(v1alpha1.DefaultNamespace),
	} {
		// Readable by the image's non-root user (docker cp keeps the modes).
		if err := os.WriteFile(filepath.Join(sa, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for d := sa; d != filepath.Dir(root); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// The container: host network, so that 127.0.0.1 is the test's API server. The files
	// are copied in (docker cp) rather than bind-mounted, so that this also works with a
	// daemon that does not share this file system; that needs a writable root file system.
	u, err := url.Parse(cluster.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "https://127.0.0.1:" + u.Port()
	container, err := docker(ctx, "create", "--name", "kubectl-registry-e2e-"+suffix, "--network", "host",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"-e", "KUBERNETES_SERVICE_HOST=127.0.0.1", "-e", "KUBERNETES_SERVICE_PORT="+u.Port(),
		tag,
		"--cluster-name", "demo", "--api-server-endpoint", endpoint, "--namespace", v1alpha1.DefaultNamespace,
		"--leader-elect=true", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "40", container).CombinedOutput()
			t.Logf("container logs:\n%s", logs)
		}
		if _, err := docker(context.Background(), "rm", "-f", container); err != nil {
			t.Errorf("removing the container: %v", err)
		}
	})
	if _, err := docker(ctx, "cp", root+"/.", container+":/"); err != nil {
		t.Fatal(err)
	}
	if _, err := docker(ctx, "start", container); err != nil {
		t.Fatal(err)
	}

	var local v1alpha1.Cluster
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if state, _ := docker(ctx, "inspect", "-f", "{{.State.Status}}", container); state == "exited" || state == "dead" {
			return false, fmt.Errorf("the container stopped (%s)", state)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: "demo"}, &local); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return local.Status.Type == v1alpha1.ClusterTypeLocal && local.Status.State == v1alpha1.ClusterStateReady, nil
	})
	if err != nil {
		t.Fatalf("the local Cluster demo did not become Ready (type %q, state %q, message %q): %v",
			local.Status.Type, local.Status.State, local.Status.Message, err)
	}
	uid, err := cluster.KubeSystemUID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if local.Spec.ClusterID != uid {
		t.Errorf("clusterID %q, want the kube-system UID %q", local.Spec.ClusterID, uid)
	}
	var advertised []string
	for _, e := range local.Spec.KubernetesAPIEndpoints {
		advertised = append(advertised, e.ServerAddress)
	}
	if !strings.Contains(strings.Join(advertised, " "), endpoint) {
		t.Errorf("kubernetesApiEndpoints %q, want --api-server-endpoint %s", advertised, endpoint)
	}
}

// TestImageIndexInDocker: Docker pulls the multi-platform image make image-push pushes,
// each platform its own (docker pull --platform, no emulation needed to pull). The
// registry is the in-memory one of TestPushIndex on loopback, which Docker trusts over
// plain HTTP. It skips without a Docker engine on this machine.
func TestImageIndexInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	skipWithoutDocker(t)
	if h := os.Getenv("DOCKER_HOST"); h != "" && !strings.HasPrefix(h, "unix://") {
		t.Skipf("DOCKER_HOST=%s: the engine cannot reach this test's registry on loopback", h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	layoutDir := filepath.Join(t.TempDir(), "image")
	if err := writeIndex(indexOptions{BinDir: binDir(t), Platforms: imagePlatforms, Version: "v1.2.3"}, layoutDir, io.Discard); err != nil {
		t.Fatal(err)
	}
	image := fmt.Sprintf("%s/kubectl-registry-e2e:%d-%d", localRegistry(t), os.Getpid(), time.Now().UnixNano())
	if err := pushIndex(pushOptions{Layout: layoutDir, Images: []string{image}, Insecure: true, Keychain: authn.NewMultiKeychain()}, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = docker(context.Background(), "rmi", "-f", image) })
	for _, arch := range []string{"arm64", "amd64"} {
		if _, err := docker(ctx, "pull", "--platform", "linux/"+arch, image); err != nil {
			t.Fatal(err)
		}
		got, err := docker(ctx, "image", "inspect", "-f", "{{.Os}}/{{.Architecture}} {{json .Config.Entrypoint}} {{.Config.User}}", image)
		if err != nil {
			t.Fatal(err)
		}
		if want := "linux/" + arch + ` ["/kubectl-registry","serve"] 65532:65532`; got != want {
			t.Errorf("docker pull --platform linux/%s gave %q, want %q", arch, got, want)
		}
	}
}
