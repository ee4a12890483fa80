// Package plugintest runs the plugin's verbs in tests through a root command built like
// plugin/root.go, and checks the errors they return.
package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
)

// DefaultTimeout bounds a run when Command.Timeout is zero.
const DefaultTimeout = time.Minute

// NewCmd is the constructor of a verb, like apply.NewCmdApply.
type NewCmd func(genericclioptions.RESTClientGetter, genericiooptions.IOStreams) *cobra.Command

// Command is how a test runs "kubectl registry <args>".
type Command struct {
	// New are the verbs the root command gets.
	New []NewCmd
	// Stdin is what the command reads from its standard input.
	Stdin string
	// Timeout bounds the run's context; zero means DefaultTimeout.
	Timeout time.Duration
}

// Run runs "kubectl registry <args>" (args start with the verb) through a root command
// with newCmd, with DefaultTimeout. See Command.Run.
func Run(t testing.TB, newCmd NewCmd, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return Command{New: []NewCmd{newCmd}}.Run(t, args...)
}

// Run runs "kubectl registry <args>" (args start with the verb) through a root command
// built like plugin/root.go: its errors are returned, never printed, and kubectl's
// kubeconfig flags are persistent flags of the root. It logs the invocation, its output
// and its error.
func (c Command) Run(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	streams, in, out, errOut := genericiooptions.NewTestIOStreams()
	in.WriteString(c.Stdin)
	root, configFlags := newRoot()
	root.SetOut(out)
	root.SetErr(errOut)
	for _, newCmd := range c.New {
		root.AddCommand(newCmd(configFlags, streams))
	}
	root.SetArgs(args)
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err = root.ExecuteContext(ctx)
	t.Logf("%s\nstdout:\n%sstderr:\n%serr: %v", strings.Join(args, " "), Redact(out.String()), Redact(errOut.String()), err)
	return out.String(), errOut.String(), err
}

// newRoot returns a root command built like plugin/root.go: its errors are returned,
// never printed, and kubectl's kubeconfig flags are persistent flags of the root.
func newRoot() (*cobra.Command, *genericclioptions.ConfigFlags) {
	root := &cobra.Command{
		Use:           "kubectl-registry",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl registry"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
	configFlags := genericclioptions.NewConfigFlags(true)
	configFlags.AddFlags(root.PersistentFlags())
	return root, configFlags
}

// RunVerb runs "kubectl registry <verb> <args>" where verb is a command the test built
// from Options of its own (a fake Factory, a clock), under a root built like
// plugin/root.go, with DefaultTimeout, and returns its error. What the verb prints goes
// to its Options' streams.
func RunVerb(t testing.TB, verb *cobra.Command, args ...string) error {
	t.Helper()
	root, _ := newRoot()
	root.AddCommand(verb)
	root.SetArgs(append([]string{verb.Name()}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	return root.ExecuteContext(ctx)
}

// Exit is what main makes of a command's error: the exit code and the message.
type Exit struct {
	Code int
	Msg  string
}

// ExitOf returns what main makes of err (the zero Exit for nil).
func ExitOf(err error) Exit {
	if err == nil {
		return Exit{}
	}
	return Exit{Code: cmdutil.ExitCode(err), Msg: err.Error()}
}

// Exit runs the command like Run and then does what main does with its error: it
// appends "error: <err>" to stderr (unless the error's message is empty) and returns the
// exit code of the error.
func (c Command) Exit(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, err := c.Run(t, args...)
	if err != nil && err.Error() != "" {
		stderr += "error: " + err.Error() + "\n"
	}
	return stdout, stderr, cmdutil.ExitCode(err)
}

// WantExitCode checks that err is not nil, that main would exit with code for it, and
// that its message holds every string of contains. It stops the test when err is nil.
func WantExitCode(t testing.TB, err error, code int, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want exit code %d and an error with %q", code, contains)
	}
	if got := cmdutil.ExitCode(err); got != code {
		t.Errorf("exit code %d, want %d (error %v)", got, code, err)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

// tokenLike matches a JSON Web Token (a ServiceAccount token) and base64 runs long enough
// to hold one (a Secret's data, a kubeconfig's client key).
var tokenLike = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+|[A-Za-z0-9+/]{120,}={0,2}`)

// Redact returns s with tokens and long base64 values replaced, for test logs: commands
// run with --show-secrets print live reader tokens, and the suite's output is scanned
// for them (cmd/registry-leakscan).
func Redact(s string) string {
	return tokenLike.ReplaceAllStringFunc(s, func(m string) string {
		return fmt.Sprintf("[redacted %d chars]", len(m))
	})
}

// SyncBuffer is a bytes.Buffer safe for a writer and a reader in two goroutines: a
// command's output (a --watch, a logger) read while the command runs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
