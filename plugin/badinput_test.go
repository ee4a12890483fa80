package plugin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
)

// badInputTimeout bounds each case of TestBadInput. Every case must fail well within it:
// nothing in the table needs a cluster that answers.
const badInputTimeout = 60 * time.Second

// badArgs is one invalid invocation of a verb, added to the verb's valid arguments.
type badArgs struct {
	name string
	args []string
	// want are substrings of what the user sees (stderr, then "error: <err>") that name
	// the problem.
	want []string
}

// silentServerSlack is what a verb may take beyond its request timeout to fail against a
// silent server (a loaded machine, a last request started just before the deadline).
const silentServerSlack = 5 * time.Second

// silentServerBound is how soon every verb fails against a server that never answers
// when --request-timeout is not given: the longest of the verbs' default request
// timeouts (docs/commands.md), plus slack.
const silentServerBound = 30*time.Second + silentServerSlack

// badInputVerb is a verb of the tree and how to call it wrongly.
type badInputVerb struct {
	// path is the command path under the root, e.g. {"create", "rule"}.
	path []string
	// args make a valid invocation apart from the cluster it talks to.
	args []string
	// noCluster marks a verb that contacts no cluster: it has no kubeconfig cases.
	noCluster bool
	// optional marks a verb that may not be registered yet; its cases are skipped until
	// it is, and its args are derived from the command (see derivedBadInputs).
	optional bool
	// malformed are bad flag values: wrong types and values outside an enum.
	malformed []badArgs
	// extra are other invalid invocations: missing arguments, unknown --contexts, ...
	extra []badArgs
}

// TestBadInput runs every verb of the tree with malformed flags, a missing context, a
// kubeconfig whose server is unreachable and a kubeconfig that does not exist, and checks
// that each fails fast with exit code > 1, a one-line message that names the problem and
// nothing on stdout.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	// Hermetic: no user kubeconfig, cache or editor.
	t.Setenv("HOME", dir)
	t.Setenv("KUBE_EDITOR", "false")
	t.Setenv("EDITOR", "false")
	// serve points klog at its own logger, writing to the case's stderr buffer.
	t.Cleanup(klog.ClearLogger)

	deadAddr := closedLoopbackAddr(t)
	deadKubeconfig := filepath.Join(dir, "dead.kubeconfig")
	writeFile(t, deadKubeconfig, fmt.Sprintf(deadKubeconfigTemplate, deadAddr))
	silentAddr := silentLoopbackAddr(t)
	silentKubeconfig := filepath.Join(dir, "silent.kubeconfig")
	writeFile(t, silentKubeconfig, fmt.Sprintf(deadKubeconfigTemplate, silentAddr))
	hungAddr := hungHTTPSAddr(t)
	hungKubeconfig := filepath.Join(dir, "hung.kubeconfig")
	writeFile(t, hungKubeconfig, fmt.Sprintf(deadKubeconfigTemplate, hungAddr))
	t.Setenv("KUBECONFIG", deadKubeconfig)
	missingKubeconfig := filepath.Join(dir, "does-not-exist.kubeconfig")
	ruleFile := filepath.Join(dir, "rule.yaml")
	writeFile(t, ruleFile, ruleYAML)

	unknownContext := []string{`context "no-such-context"`}
	// within bounds how long the cases of these names may take to fail.
	within := map[string]time.Duration{
		"silent server":                  silentServerBound,
		"silent server, request timeout": 2*time.Second + silentServerSlack,
		"hung server, request timeout":   2*time.Second + silentServerSlack,
	}
	verbs := []badInputVerb{
		{
			path:      []string{"version"},
			noCluster: true,
			malformed: []badArgs{
				{"bad bool", []string{"--insecure-skip-tls-verify=maybe"}, []string{`invalid argument "maybe" for "--insecure-skip-tls-verify" flag`}},
				{"bad output", []string{"-o", "foo"}, []string{`--output must be one of (json, yaml), got "foo"`}},
			},
			extra: []badArgs{
				{"argument", []string{"extra"}, []string{`unexpected argument "extra"`}},
			},
		},
		{
			path: []string{"serve"},
			malformed: []badArgs{
				{"bad int", []string{"--sync-workers=abc"}, []string{`invalid argument "abc" for "--sync-workers" flag`}},
				{"bad duration", []string{"--peer-health-interval=soon"}, []string{`invalid argument "soon" for "--peer-health-interval" flag`}},
				{"bad log level", []string{"--zap-log-level=loud"}, []string{`invalid argument "loud" for "--zap-log-level" flag`}},
				{"bad log encoder", []string{"--zap-encoder=xml"}, []string{`invalid argument "xml" for "--zap-encoder" flag`}},
				{"bad bind address", []string{"--metrics-bind-address=nowhere"}, []string{`invalid metrics bind address "nowhere"`}},
				{"bad cluster name", []string{"--cluster-name=Foo_Bar"}, []string{`invalid cluster name "Foo_Bar"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
		},
		{
			path: []string{"install"},
			args: []string{"--cluster-name", "east"},
			malformed: []badArgs{
				{"bad int", []string{"--replicas=two"}, []string{`invalid argument "two" for "--replicas" flag`}},
				{"bad duration", []string{"--timeout=forever"}, []string{`invalid argument "forever" for "--timeout" flag`}},
				{"bad dry-run", []string{"--dry-run=bogus"}, []string{`--dry-run must be "none", "client" or "server", got "bogus"`}},
				{"bad output", []string{"-o", "foo"}, []string{`output format "foo"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
		},
		{
			path: []string{"uninstall"},
			malformed: []badArgs{
				{"bad bool", []string{"--delete-crds=maybe"}, []string{`invalid argument "maybe" for "--delete-crds" flag`}},
				{"bad duration", []string{"--timeout=forever"}, []string{`invalid argument "forever" for "--timeout" flag`}},
				{"bad dry-run", []string{"--dry-run=bogus"}, []string{`--dry-run must be "none", "client" or "server", got "bogus"`}},
				{"bad output", []string{"-o", "foo"}, []string{`--output must be "name", got "foo"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
		},
		{
			path: []string{"join"},
			args: []string{"--peer-context", "dead-peer"},
			malformed: []badArgs{
				{"bad bool", []string{"--wait=maybe"}, []string{`invalid argument "maybe" for "--wait" flag`}},
				{"bad duration", []string{"--timeout=forever"}, []string{`invalid argument "forever" for "--timeout" flag`}},
				{"bad dry-run", []string{"--dry-run=bogus"}, []string{`--dry-run must be`, `got "bogus"`}},
				{"bad output", []string{"-o", "foo"}, []string{`output format "foo"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
			extra: []badArgs{
				{"no peer context", []string{"--peer-context="}, []string{"--peer-context is required"}},
				{"unknown peer context", []string{"--peer-context", "no-such-context"}, []string{`--peer-context "no-such-context": no such context`}},
				{"missing peer kubeconfig", []string{"--peer-kubeconfig", missingKubeconfig}, []string{missingKubeconfig, "no such file or directory"}},
			},
		},
		{
			path: []string{"status"},
			malformed: []badArgs{
				{"bad bool", []string{"--insecure-skip-tls-verify=maybe"}, []string{`invalid argument "maybe" for "--insecure-skip-tls-verify" flag`}},
				{"bad output", []string{"-o", "foo"}, []string{`--output must be one of (json, yaml, wide), got "foo"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
			extra: []badArgs{
				{"unknown contexts", []string{"--contexts", "dead,no-such-context"}, []string{`--contexts: no context "no-such-context"`}},
				{"unreachable contexts", []string{"--contexts", "dead,dead-peer"}, []string{deadAddr, "connection refused", "could not read 2 of 2 contexts"}},
			},
		},
		{
			path: []string{"get"},
			args: []string{"pods"},
			malformed: []badArgs{
				{"bad int", []string{"--limit=ten"}, []string{`invalid argument "ten" for "--limit" flag`}},
				{"bad duration", []string{"--cluster-timeout=soon"}, []string{`invalid argument "soon" for "--cluster-timeout" flag`}},
				{"bad output", []string{"-o", "foo"}, []string{`output format "foo"`}},
				{"bad sort-by", []string{"--sort-by", ".metadata.name["}, []string{"--sort-by"}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
			extra: []badArgs{
				{"unknown contexts", []string{"--contexts", "dead,no-such-context"}, []string{`--contexts: context "no-such-context" not found`}},
				{"context and contexts", []string{"--context", "dead", "--contexts", "dead"}, []string{"--context and --contexts cannot be used together"}},
			},
		},
		{
			path: []string{"sync-diff"},
			malformed: []badArgs{
				{"bad bool", []string{"--show-secrets=maybe"}, []string{`invalid argument "maybe" for "--show-secrets" flag`}},
				{"bad output", []string{"-o", "foo"}, []string{`--output must be yaml or json, got "foo"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
			extra: []badArgs{
				{"unknown contexts", []string{"--contexts", "dead,no-such-context"}, []string{`context "no-such-context": no such context`}},
				{"missing rule file", []string{"-f", missingKubeconfig}, []string{missingKubeconfig, "no such file or directory"}},
			},
		},
		{
			path: []string{"apply"},
			args: []string{"-f", ruleFile},
			malformed: []badArgs{
				{"bad bool", []string{"--insecure-skip-tls-verify=maybe"}, []string{`invalid argument "maybe" for "--insecure-skip-tls-verify" flag`}},
				{"bad dry-run", []string{"--dry-run=bogus"}, []string{`--dry-run must be "none" or "server", got "bogus"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
			extra: []badArgs{
				{"unknown contexts", []string{"--contexts", "dead,no-such-context"}, []string{`--contexts: no context "no-such-context"`}},
				{"missing file", []string{"-f", missingKubeconfig}, []string{missingKubeconfig, "no such file or directory"}},
			},
		},
		{
			path: []string{"create", "rule"},
			args: []string{"r1", "--kind", "Secret"},
			malformed: []badArgs{
				{"bad bool", []string{"--sync-disabled=maybe"}, []string{`invalid argument "maybe" for "--sync-disabled" flag`}},
				{"bad dry-run", []string{"--dry-run=bogus"}, []string{`--dry-run must be "none", "client" or "server", got "bogus"`}},
				{"bad deletion policy", []string{"--deletion-policy=bogus"}, []string{`--deletion-policy must be Retain or Delete, got "bogus"`}},
				{"bad output", []string{"-o", "foo"}, []string{`output format "foo"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
			extra: []badArgs{
				{"no kind", []string{"--kind="}, []string{"--kind is required"}},
			},
		},
		{
			path: []string{"create", "feature"},
			args: []string{"f1", "--feature", "example.com/gpu"},
			malformed: []badArgs{
				{"bad bool", []string{"--insecure-skip-tls-verify=maybe"}, []string{`invalid argument "maybe" for "--insecure-skip-tls-verify" flag`}},
				{"bad dry-run", []string{"--dry-run=bogus"}, []string{`--dry-run must be "none", "client" or "server", got "bogus"`}},
				{"bad output", []string{"-o", "foo"}, []string{`output format "foo"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
		},
		{
			path: []string{"edit"},
			args: []string{"rsr", "r1"},
			malformed: []badArgs{
				{"bad bool", []string{"--insecure-skip-tls-verify=maybe"}, []string{`invalid argument "maybe" for "--insecure-skip-tls-verify" flag`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
			extra: []badArgs{
				{"unknown contexts", []string{"--contexts", "dead,no-such-context"}, []string{`--contexts: no context "no-such-context"`}},
			},
		},
		{
			path:      []string{"completion"},
			args:      []string{"bash"},
			noCluster: true,
			malformed: []badArgs{
				{"bad bool", []string{"--no-descriptions=maybe"}, []string{`invalid argument "maybe" for "--no-descriptions" flag`}},
			},
			extra: []badArgs{
				{"two shells", []string{"zsh"}, []string{`accepts 1 arg(s), received 2`}},
			},
		},
		{
			path: []string{"revoke"},
			args: []string{"dead"},
			malformed: []badArgs{
				{"bad bool", []string{"--keep-shared=maybe"}, []string{`invalid argument "maybe" for "--keep-shared" flag`}},
				{"bad duration", []string{"--timeout=forever"}, []string{`invalid argument "forever" for "--timeout" flag`}},
				{"bad dry-run", []string{"--dry-run=bogus"}, []string{`--dry-run must be "none", "client" or "server", got "bogus"`}},
				{"bad request timeout", []string{"--request-timeout=abc"}, []string{"Invalid timeout value"}},
			},
			extra: []badArgs{
				{"two clusters", []string{"other"}, []string{"accepts 1 arg(s), received 2"}},
				{"bad namespace", []string{"--namespace", "Not_A_Namespace"}, []string{`--namespace "Not_A_Namespace"`}},
				{"wait in a dry run", []string{"--dry-run=server", "--wait"}, []string{"--wait cannot be used with --dry-run"}},
			},
		},
		{
			// Being written: its cases run once the verb is in the tree.
			path:     []string{"leave"},
			optional: true,
		},
	}

	// Every verb of the tree is in the table.
	inTable := map[string]bool{}
	for _, v := range verbs {
		inTable[v.path[0]] = true
	}
	for _, c := range NewCmdRegistry(genericiooptions.NewTestIOStreamsDiscard()).Commands() {
		if !c.Hidden && c.Name() != "help" && !inTable[c.Name()] {
			t.Errorf("verb %q is not in the table of TestBadInput", c.Name())
		}
	}

	for _, v := range verbs {
		t.Run(strings.Join(v.path, " "), func(t *testing.T) {
			cmd := lookupCommand(NewCmdRegistry(genericiooptions.NewTestIOStreamsDiscard()), v.path)
			if cmd == nil {
				if v.optional {
					t.Skipf("%q is not registered yet", strings.Join(v.path, " "))
				}
				t.Fatalf("%q is not registered", strings.Join(v.path, " "))
			}
			if v.optional {
				v.args, v.malformed = derivedBadInputs(cmd)
			}
			cases := []badArgs{
				{"unknown flag", []string{"--no-such-flag"}, []string{"unknown flag: --no-such-flag"}},
			}
			cases = append(cases, v.malformed...)
			if !v.noCluster {
				cases = append(cases,
					badArgs{"unknown context", []string{"--context", "no-such-context"}, unknownContext},
					badArgs{"unreachable server", nil, []string{deadAddr, "connection refused"}},
					badArgs{"missing kubeconfig", []string{"--kubeconfig", missingKubeconfig}, []string{missingKubeconfig, "no such file or directory"}},
					// A server that accepts connections and never answers fails the
					// verb within the default request timeout, or within
					// --request-timeout when it is given.
					badArgs{"silent server", []string{"--kubeconfig", silentKubeconfig}, []string{silentAddr}},
					badArgs{"silent server, request timeout", []string{"--kubeconfig", silentKubeconfig, "--request-timeout=2s"}, []string{silentAddr}},
					// The same once TLS is through: the HTTP requests get no answer.
					// (Without --request-timeout this takes the verb's default request
					// timeout, up to 30 s: not run for every verb.)
					badArgs{"hung server, request timeout", []string{"--kubeconfig", hungKubeconfig, "--request-timeout=2s"}, []string{hungAddr}},
				)
			}
			cases = append(cases, v.extra...)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					args := append(append(append([]string{}, v.path...), v.args...), c.args...)
					if !v.noCluster && !hasFlag(c.args, "--kubeconfig") {
						args = append(args, "--kubeconfig", deadKubeconfig)
					}
					if elapsed := checkBadInput(t, args, c.want); within[c.name] > 0 && elapsed > within[c.name] {
						t.Errorf("failed after %s, want within %s", elapsed.Round(time.Millisecond), within[c.name])
					}
				})
			}
		})
	}
}

// checkBadInput runs "kubectl registry <args>" through the plugin's root command within
// badInputTimeout and checks that it fails with exit code > 1, a one-line message that
// holds every string of want, and nothing on stdout.
func checkBadInput(t *testing.T, args []string, want []string) time.Duration {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	root := NewCmdRegistry(streams)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(t.Context(), badInputTimeout)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- root.ExecuteContext(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(badInputTimeout + 30*time.Second):
		// The command ignores its context: fail now rather than hang the suite (the
		// goroutine is left behind).
		t.Fatalf("kubectl registry %s hangs: still running %s after its context's deadline", strings.Join(args, " "), 30*time.Second)
	}
	elapsed := time.Since(start)
	stdout, stderr := out.String(), errOut.String()
	t.Logf("kubectl registry %s (%s)\nstdout:\n%sstderr:\n%serr: %v", strings.Join(args, " "), elapsed.Round(time.Millisecond), stdout, stderr, err)

	if ctx.Err() != nil {
		t.Errorf("the command ran until the %s deadline of the test instead of failing fast", badInputTimeout)
	}
	if err == nil {
		t.Fatalf("no error, want exit code > 1 with a message holding %q", want)
		return elapsed
	}
	if code := ExitCode(err); code <= 1 {
		t.Errorf("exit code %d, want > 1", code)
	}
	msg := err.Error()
	// What main shows the user: the command's stderr, then the error. An error with an
	// empty message (an ExitError that only carries the code) prints nothing: the
	// command has reported the failure on stderr itself, as "error: ..." lines.
	shown := stderr
	if msg != "" {
		line, hint, _ := strings.Cut(strings.TrimRight(msg, "\n"), "\n")
		if strings.TrimSpace(line) == "" {
			t.Errorf("the error message %q has an empty first line", msg)
		}
		if hint != "" && (!strings.HasPrefix(hint, "See 'kubectl registry ") || !strings.HasSuffix(hint, "' for usage.")) {
			t.Errorf("the error message is not one line (and an optional usage hint):\n%s", msg)
		}
		shown += "error: " + msg + "\n"
	} else if !strings.Contains("\n"+stderr, "\nerror: ") {
		t.Errorf("the error has no message and the command printed no \"error: \" line on stderr")
	}
	for _, s := range want {
		if !strings.Contains(shown, s) {
			t.Errorf("the user sees no %q in:\n%s", s, shown)
		}
	}
	for _, s := range []string{"Usage:", "panic", "goroutine "} {
		if strings.Contains(shown, s) {
			t.Errorf("the user sees %q in:\n%s", s, shown)
		}
	}
	if stdout != "" {
		t.Errorf("the command printed to stdout on error:\n%s", stdout)
	}
	return elapsed
}

// derivedBadInputs returns, for a verb not in the table yet, valid arguments (every
// upper-case placeholder of its Use line, e.g. CLUSTER, becomes "dead"; required flags
// get "dead") and the malformed flag values its flags allow: a typed flag given a word,
// and --dry-run and --output outside their enums.
func derivedBadInputs(cmd *cobra.Command) (args []string, malformed []badArgs) {
	for _, f := range strings.Fields(cmd.Use)[1:] {
		if f == strings.ToUpper(f) && strings.Trim(f, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == "" {
			args = append(args, "dead")
		}
	}
	typed := "insecure-skip-tls-verify" // every verb inherits it from the root
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if _, ok := f.Annotations[cobra.BashCompOneRequiredFlag]; ok {
			args = append(args, "--"+f.Name, "dead")
		}
		switch f.Value.Type() {
		case "bool", "int", "int32", "int64", "duration", "float32", "float64":
			typed = f.Name
		}
	})
	malformed = append(malformed, badArgs{"bad typed value", []string{"--" + typed + "=maybe"}, []string{`invalid argument "maybe" for "--` + typed + ``}})
	if cmd.Flags().Lookup("dry-run") != nil {
		malformed = append(malformed, badArgs{"bad dry-run", []string{"--dry-run=bogus"}, []string{"--dry-run", `"bogus"`}})
	}
	if cmd.Flags().Lookup("output") != nil {
		malformed = append(malformed, badArgs{"bad output", []string{"--output=foo"}, []string{`"foo"`}})
	}
	return args, malformed
}

// lookupCommand returns the command at path under root, or nil.
func lookupCommand(root *cobra.Command, path []string) *cobra.Command {
	cmd := root
	for _, name := range path {
		var next *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == name || c.HasAlias(name) {
				next = c
			}
		}
		if next == nil {
			return nil
		}
		cmd = next
	}
	return cmd
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// closedLoopbackAddr returns a loopback address nothing listens on: connections to it are
// refused at once.
func closedLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// silentLoopbackAddr returns a loopback address that accepts connections and never
// answers on them, as a hung API server or a black-holing proxy does. The connections
// are closed when the test ends.
func silentLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// hungHTTPSAddr returns the loopback address of an HTTPS server that completes the TLS
// handshake and never answers a request, as a hung API server does.
func hungHTTPSAddr(t *testing.T) string {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	return srv.Listener.Addr().String()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// deadKubeconfigTemplate is a kubeconfig whose two contexts (dead, the current one, and
// dead-peer) point at a server address (%s) nothing listens on.
const deadKubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- name: dead
  cluster:
    server: https://%[1]s
    insecure-skip-tls-verify: true
users:
- name: dead
  user:
    token: not-a-token
contexts:
- name: dead
  context: {cluster: dead, user: dead}
- name: dead-peer
  context: {cluster: dead, user: dead}
current-context: dead
`

// ruleYAML is a valid ResourceSyncRule for apply.
const ruleYAML = `apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: r1
spec:
  groupVersionKind:
    version: v1
    kind: Secret
  rules:
  - match:
    - objectKey:
        name: test-secret
        namespace: default
`
