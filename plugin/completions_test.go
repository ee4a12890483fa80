package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/completion"
)

// fakeServer answers what completions ask an API server: lists of the registry's
// resources and legacy discovery (core v1 and apps/v1).
func fakeServer(t *testing.T) *httptest.Server {
	t.Helper()
	list := func(kind string, names ...string) map[string]any {
		items := []map[string]any{}
		for _, n := range names {
			items = append(items, map[string]any{"apiVersion": "clusterregistry.k8s.cisco.com/v1alpha1", "kind": kind, "metadata": map[string]any{"name": n}})
		}
		return map[string]any{"apiVersion": "clusterregistry.k8s.cisco.com/v1alpha1", "kind": kind + "List", "metadata": map[string]any{}, "items": items}
	}
	resources := func(gv string, names ...string) map[string]any {
		rs := []map[string]any{}
		for _, n := range names {
			rs = append(rs, map[string]any{"name": n, "singularName": "", "namespaced": true, "kind": n, "verbs": []string{"get", "list"}})
		}
		// A subresource and a resource that cannot be listed are not offered.
		rs = append(rs, map[string]any{"name": names[0] + "/status", "namespaced": true, "kind": "x", "verbs": []string{"get"}},
			map[string]any{"name": "nolist" + names[0], "namespaced": true, "kind": "x", "verbs": []string{"create"}})
		return map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": rs}
	}
	answers := map[string]any{
		"/apis/clusterregistry.k8s.cisco.com/v1alpha1/clusters":          list("Cluster", "east", "west", "north"),
		"/apis/clusterregistry.k8s.cisco.com/v1alpha1/resourcesyncrules": list("ResourceSyncRule", "secrets", "configs"),
		"/apis/clusterregistry.k8s.cisco.com/v1alpha1/clusterfeatures":   list("ClusterFeature", "gpu"),
		"/api":          map[string]any{"kind": "APIVersions", "versions": []string{"v1"}},
		"/apis":         map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []map[string]any{{"name": "apps", "versions": []map[string]any{{"groupVersion": "apps/v1", "version": "v1"}}, "preferredVersion": map[string]any{"groupVersion": "apps/v1", "version": "v1"}}}},
		"/api/v1":       resources("v1", "configmaps", "secrets"),
		"/apis/apps/v1": resources("apps/v1", "deployments"),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// writeKubeconfig writes a kubeconfig with the contexts east and west on server, and
// other on a closed port; the current context is east.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: %q}
- name: closed
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: alice
  user: {token: not-a-secret}
contexts:
- name: east
  context: {cluster: fake, user: alice}
- name: west
  context: {cluster: fake, user: alice}
- name: other
  context: {cluster: closed, user: alice}
current-context: east
`, server)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// complete runs "kubectl-registry __complete args..." and returns the candidates, the
// directive line and stderr.
func complete(t *testing.T, args ...string) (candidates []string, directive, stderr string) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmdRegistry(streams)
	cmd.SetArgs(append([]string{"__complete"}, args...))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("__complete %v: %v", args, err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	directive = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t") // drop descriptions
		candidates = append(candidates, name)
	}
	return candidates, directive, errOut.String()
}

// cobraStderr is the only line cobra's __complete writes to stderr: not an error.
const cobraStderr = "Completion ended with directive: ShellCompDirectiveNoFileComp\n"

func TestCompletion(t *testing.T) {
	kc := writeKubeconfig(t, fakeServer(t).URL)
	noFile := ":4"
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"verbs", []string{""}, []string{"apply", "completion", "create", "edit", "get", "help", "install", "join", "leave", "revoke", "serve", "status", "sync-diff", "uninstall", "version"}},
		{"completion shells", []string{"completion", ""}, []string{"bash", "zsh", "fish", "powershell"}},
		{"--context", []string{"status", "--kubeconfig", kc, "--context", ""}, []string{"east", "other", "west"}},
		{"--context with a prefix", []string{"leave", "--kubeconfig", kc, "--context", "w"}, []string{"west"}},
		{"--contexts", []string{"status", "--kubeconfig", kc, "--contexts", ""}, []string{"east", "other", "west"}},
		{"--contexts after a comma", []string{"get", "--kubeconfig", kc, "--contexts", "west,"}, []string{"west,east", "west,other"}},
		{"--contexts of apply", []string{"apply", "--kubeconfig", kc, "--contexts", "e"}, []string{"east"}},
		{"--contexts of edit", []string{"edit", "--kubeconfig", kc, "--contexts", "o"}, []string{"other"}},
		{"--contexts of sync-diff", []string{"sync-diff", "--kubeconfig", kc, "--contexts", "east,w"}, []string{"east,west"}},
		{"--peer-context", []string{"join", "--kubeconfig", kc, "--peer-context", ""}, []string{"east", "other", "west"}},
		{"--cluster", []string{"status", "--kubeconfig", kc, "--cluster", ""}, []string{"closed", "fake"}},
		{"--user", []string{"status", "--kubeconfig", kc, "--user", ""}, []string{"alice"}},
		{"leave CLUSTER", []string{"leave", "--kubeconfig", kc, ""}, []string{"east", "north", "west"}},
		{"leave takes one CLUSTER", []string{"leave", "--kubeconfig", kc, "east", ""}, nil},
		{"revoke CLUSTER", []string{"revoke", "--kubeconfig", kc, ""}, []string{"east", "north", "west"}},
		{"revoke CLUSTER with a prefix", []string{"revoke", "--kubeconfig", kc, "--context", "west", "w"}, []string{"west"}},
		{"revoke takes one CLUSTER", []string{"revoke", "--kubeconfig", kc, "west", ""}, nil},
		{"revoke --context", []string{"revoke", "--kubeconfig", kc, "--context", "e"}, []string{"east"}},
		{"get --clusters", []string{"get", "--kubeconfig", kc, "pods", "--clusters", "east,"}, []string{"east,north", "east,west"}},
		{"get RESOURCE", []string{"get", "--kubeconfig", kc, ""}, []string{"configmaps", "deployments.apps", "secrets", "workloads"}},
		{"get RESOURCE with a prefix", []string{"get", "--kubeconfig", kc, "de"}, []string{"deployments.apps"}},
		{"get RESOURCE,RESOURCE", []string{"get", "--kubeconfig", kc, "secrets,c"}, []string{"secrets,configmaps"}},
		{"get NAME", []string{"get", "--kubeconfig", kc, "pods", ""}, nil},
		{"edit TYPE", []string{"edit", "--kubeconfig", kc, ""}, []string{"cf", "clusterfeature", "resourcesyncrule", "rsr"}},
		{"edit rsr NAME", []string{"edit", "--kubeconfig", kc, "rsr", ""}, []string{"configs", "secrets"}},
		{"edit cf NAME through --contexts", []string{"edit", "--kubeconfig", kc, "--contexts", "west,east", "cf", ""}, []string{"gpu"}},
		{"edit TYPE/NAME", []string{"edit", "--kubeconfig", kc, "rsr/s"}, []string{"rsr/secrets"}},
		{"edit unknown TYPE", []string{"edit", "--kubeconfig", kc, "cluster", ""}, nil},
		{"sync-diff RULE", []string{"sync-diff", "--kubeconfig", kc, ""}, []string{"configs", "secrets"}},
		{"sync-diff RULE not twice", []string{"sync-diff", "--kubeconfig", kc, "secrets", ""}, []string{"configs"}},
		{"status takes no argument", []string{"status", "--kubeconfig", kc, ""}, nil},
		{"install --context", []string{"install", "--kubeconfig", kc, "--context", "e"}, []string{"east"}},
		{"uninstall --context", []string{"uninstall", "--kubeconfig", kc, "--context", "w"}, []string{"west"}},
		{"create rule --context", []string{"create", "rule", "--kubeconfig", kc, "--context", "o"}, []string{"other"}},
		{"create rule NAME", []string{"create", "rule", "--kubeconfig", kc, ""}, nil},
		{"serve --context", []string{"serve", "--kubeconfig", kc, "--context", "e"}, []string{"east"}},
		{"version takes no argument", []string{"version", ""}, nil},
		{"join takes no argument", []string{"join", "--kubeconfig", kc, ""}, nil},
		{"unreachable context", []string{"leave", "--kubeconfig", kc, "--context", "other", ""}, nil},
		{"unreadable kubeconfig", []string{"status", "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--context", ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, directive, stderr := complete(t, tc.args...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			if tc.name != "verbs" && directive != noFile {
				t.Errorf("directive %q, want %q (no file names)", directive, noFile)
			}
			if tc.name != "verbs" && stderr != cobraStderr {
				t.Errorf("stderr %q, want only cobra's %q", stderr, cobraStderr)
			}
		})
	}
}

// TestCompletionUnreachable: a server that refuses connections, and one that accepts
// them and never answers, give no candidates within completion.Timeout and nothing on
// stderr but cobra's directive line.
func TestCompletionUnreachable(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn // open, never answered
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()

	for _, server := range []struct{ name, url string }{
		{"refused", "https://" + closedAddr},
		{"silent", "https://" + silent.Addr().String()},
	} {
		kc := writeKubeconfig(t, server.url)
		for _, args := range [][]string{
			{"leave", "--kubeconfig", kc, ""},
			{"revoke", "--kubeconfig", kc, ""},
			{"get", "--kubeconfig", kc, ""},
			{"get", "--kubeconfig", kc, "pods", "--clusters", ""},
			{"edit", "--kubeconfig", kc, "rsr", ""},
			{"sync-diff", "--kubeconfig", kc, ""},
		} {
			t.Run(server.name+" "+args[0]+" "+strings.Join(args[3:], " "), func(t *testing.T) {
				start := time.Now()
				got, directive, stderr := complete(t, args...)
				took := time.Since(start)
				if len(got) != 0 || directive != ":4" {
					t.Errorf("candidates %q, directive %q; want none and :4", got, directive)
				}
				if stderr != cobraStderr {
					t.Errorf("stderr %q, want only cobra's %q", stderr, cobraStderr)
				}
				if took > completion.Timeout+time.Second {
					t.Errorf("took %s, want at most %s (completion.Timeout and a second of slack)", took, completion.Timeout+time.Second)
				}
			})
		}
	}
}

// TestCompletionScripts: each shell gets a script for kubectl-registry; another shell is
// a usage error.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		for _, args := range [][]string{{"completion", shell}, {"completion", shell, "--no-descriptions"}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				stdout, stderr, err := execute(t, args...)
				if err != nil || stderr != "" {
					t.Fatalf("error %v, stderr %q", err, stderr)
				}
				if !strings.Contains(stdout, "kubectl-registry") || !strings.Contains(stdout, "__complete") {
					t.Errorf("the %s script does not complete kubectl-registry through __complete:\n%.300s", shell, stdout)
				}
			})
		}
	}
	_, _, err := execute(t, "completion", "tcsh")
	if err == nil || ExitCode(err) != ExitCodeError || !strings.Contains(err.Error(), `unsupported shell "tcsh": must be one of (bash, zsh, fish, powershell)`) {
		t.Errorf("completion tcsh: %v (exit code %d), want a usage error", err, ExitCode(err))
	}
}
