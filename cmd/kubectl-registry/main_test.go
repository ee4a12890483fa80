package main

import (
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

const testVersion = "v9.8.7-e2e"

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// buildBinary builds kubectl-registry once per test run into a temporary directory,
// setting the version through the documented -ldflags -X path, and
// kubectl_complete-registry next to it, and returns the directory. It skips when no go command is on PATH.
func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot build kubectl-registry")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kubectl-registry-e2e-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command(goBin, "build",
			"-ldflags", "-X github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo.Version="+testVersion,
			"-o", filepath.Join(binDir, "kubectl-registry"), ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = errors.New(err.Error() + ": " + string(out))
			return
		}
		// kubectl completes the plugin through kubectl_complete-registry on PATH.
		cmd = exec.Command(goBin, "build", "-o", filepath.Join(binDir, "kubectl_complete-registry"), "../kubectl_complete-registry")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New(err.Error() + ": " + string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("building kubectl-registry: %v", buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// run runs name with args and an environment that finds the built plugin first on PATH
// and no kubeconfig of the user; it returns stdout, stderr and the exit code.
func run(t *testing.T, dir, name string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(),
		"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+filepath.Join(t.TempDir(), "no-kubeconfig"),
	)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("running %s %v: %v", name, args, err)
		}
		code = ee.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

func TestExitCodes(t *testing.T) {
	dir := buildBinary(t)
	bin := filepath.Join(dir, "kubectl-registry")
	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{args: []string{"version"}, wantCode: 0, wantStdout: "kubectl-registry " + testVersion + " (commit "},
		{args: []string{"version", "-o", "json"}, wantCode: 0, wantStdout: "{\n  \"version\": \"" + testVersion + "\""},
		{args: []string{"--help"}, wantCode: 0, wantStdout: "kubectl registry"},
		{
			args:       []string{"nosuchcmd"},
			wantCode:   2,
			wantStderr: []string{`error: unknown command "nosuchcmd" for "kubectl registry"`, "See 'kubectl registry --help' for usage."},
		},
		{
			args:       []string{"version", "-o", "bogus"},
			wantCode:   2,
			wantStderr: []string{"error: --output must be one of (json, yaml)", "See 'kubectl registry version --help' for usage."},
		},
		{
			args:       []string{"--nosuchflag"},
			wantCode:   2,
			wantStderr: []string{"error: unknown flag: --nosuchflag"},
		},
		{
			args:       []string{"serve", "--cluster-name", "Foo_Bar"},
			wantCode:   2,
			wantStderr: []string{`error: invalid cluster name "Foo_Bar"`},
		},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, stderr, code := run(t, dir, bin, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stdout %q, stderr %q", code, tt.wantCode, stdout, stderr)
			}
			if !strings.Contains(stdout, tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout, tt.wantStdout)
			}
			for _, s := range tt.wantStderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q does not contain %q", stderr, s)
				}
			}
			if tt.wantCode == 0 && stderr != "" {
				t.Errorf("unexpected stderr %q", stderr)
			}
			if tt.wantCode != 0 && (stdout != "" || strings.Count(stderr, "error: ") != 1) {
				t.Errorf("want exactly one error line and no stdout; stdout %q, stderr %q", stdout, stderr)
			}
		})
	}
}

// TestKubectlPlugin checks that the real kubectl finds the binary on PATH as the plugin
// "kubectl registry" and passes its output and exit code through.
func TestKubectlPlugin(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	kubectl := filepath.Join(assets, "kubectl")
	if assets == "" {
		t.Skip("KUBEBUILDER_ASSETS unset: no kubectl to discover the plugin with; run make testbin, or make test")
	}
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("no kubectl in KUBEBUILDER_ASSETS (%v): run make testbin, or make test", err)
	}
	dir := buildBinary(t)

	t.Run("plugin list", func(t *testing.T) {
		stdout, stderr, code := run(t, dir, kubectl, "plugin", "list")
		want := filepath.Join(dir, "kubectl-registry")
		if !strings.Contains(stdout, want) {
			t.Errorf("kubectl plugin list (exit %d) does not list %s; stdout %q, stderr %q", code, want, stdout, stderr)
		}
		if strings.Contains(stderr, want) {
			t.Errorf("kubectl plugin list warns about %s: %q", want, stderr)
		}
	})
	t.Run("registry version", func(t *testing.T) {
		stdout, stderr, code := run(t, dir, kubectl, "registry", "version")
		if code != 0 || !strings.HasPrefix(stdout, "kubectl-registry "+testVersion+" (commit ") {
			t.Errorf("kubectl registry version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
	t.Run("registry help", func(t *testing.T) {
		stdout, stderr, code := run(t, dir, kubectl, "registry", "version", "--help")
		if code != 0 || !strings.Contains(stdout, "kubectl registry version") {
			t.Errorf("kubectl registry version --help: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
	t.Run("registry nosuchcmd", func(t *testing.T) {
		_, stderr, code := run(t, dir, kubectl, "registry", "nosuchcmd")
		if code != 2 || !strings.Contains(stderr, `unknown command "nosuchcmd" for "kubectl registry"`) {
			t.Errorf("kubectl registry nosuchcmd: exit %d, want 2; stderr %q", code, stderr)
		}
	})
}

// TestKubectlPluginCompletion checks that the real kubectl completes "kubectl registry
// ..." through kubectl_complete-registry on PATH: verbs, flags and kubeconfig contexts.
func TestKubectlPluginCompletion(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	kubectl := filepath.Join(assets, "kubectl")
	if assets == "" {
		t.Skip("KUBEBUILDER_ASSETS unset: no kubectl to complete the plugin with; run make testbin, or make test")
	}
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("no kubectl in KUBEBUILDER_ASSETS (%v): run make testbin, or make test", err)
	}
	dir := buildBinary(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {}
contexts:
- name: east
  context: {cluster: c, user: u}
- name: west
  context: {cluster: c, user: u}
current-context: east
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"registry", "sta"}, []string{"status"}},
		{[]string{"registry", "status", "--contexts", ""}, []string{"east", "west"}},
		{[]string{"registry", "join", "--kubeconfig", kc, "--peer-context", "w"}, []string{"west"}},
		{[]string{"registry", "completion", "z"}, []string{"zsh"}},
		// An unreachable server: nothing, quickly.
		{[]string{"registry", "leave", "--kubeconfig", kc, ""}, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(kubectl, append([]string{"__complete"}, tc.args...)...)
			cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kc)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("kubectl __complete %v: %v; stderr %q", tc.args, err, stderr.String())
			}
			lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
			var got []string
			for _, l := range lines[:len(lines)-1] {
				name, _, _ := strings.Cut(l, "\t")
				got = append(got, name)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || lines[len(lines)-1] != ":4" {
				t.Errorf("kubectl __complete %v: candidates %q, directive %q; want %q and :4 (stderr %q)",
					tc.args, got, lines[len(lines)-1], tc.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), "kubectl_complete-registry") {
				t.Errorf("kubectl did not run kubectl_complete-registry: stderr %q", stderr.String())
			}
			if strings.Contains(strings.ToLower(stderr.String()), "error") {
				t.Errorf("stderr has an error: %q", stderr.String())
			}
		})
	}
}

// TestServeSIGTERM runs "kubectl-registry serve" against a real API server and stops it
// with SIGTERM, as the kubelet does: it must exit 0, promptly.
func TestServeSIGTERM(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS unset: run make testbin, or make test")
	}
	dir := buildBinary(t)
	// envtest logs through controller-runtime's process-wide logger; unset, it prints a
	// warning with a stack trace 30 seconds in.
	ctrllog.SetLogger(logr.Discard())
	env := &envtest.Environment{ControlPlaneStartTimeout: 2 * time.Minute, CRDDirectoryPaths: []string{"../../manifests/crds"}, ErrorIfCRDPathMissing: true}
	if _, err := env.Start(); err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	// Without --cluster-name and without a local Cluster CR, serve cannot know which
	// cluster it is: a clear error and exit code 2.
	out, err := exec.Command(filepath.Join(dir, "kubectl-registry"), "serve", "--kubeconfig", kubeconfigPath,
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0").CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 || !strings.Contains(string(out), "pass --cluster-name") {
		t.Fatalf("serve without a cluster name: %v, want exit 2 and a hint to pass --cluster-name; output:\n%s", err, out)
	}

	probeAddr, metricsAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(filepath.Join(dir, "kubectl-registry"), "serve",
		"--kubeconfig", kubeconfigPath,
		"--cluster-name", "east",
		"--health-probe-bind-address", probeAddr,
		"--metrics-bind-address", metricsAddr)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	healthy := false
	for deadline := time.Now().Add(60 * time.Second); !healthy && time.Now().Before(deadline); {
		select {
		case err := <-exited:
			t.Fatalf("serve exited early (%v); stderr:\n%s", err, stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + probeAddr + "/readyz"); err == nil {
			resp.Body.Close()
			healthy = resp.StatusCode == http.StatusOK
		}
	}
	if !healthy {
		t.Fatalf("serve not ready within 60s")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM, want exit 0; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not exit within 15s of SIGTERM; stderr:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "error: ") || stdout.String() != "" {
		t.Errorf("unexpected output: stdout %q, stderr:\n%s", stdout.String(), stderr.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
