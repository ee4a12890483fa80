// Package plugintest runs the plugin's verbs in tests through a root command built like
// plugin/root.go, and checks the errors they return.
package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
)

// DefaultTimeout bounds a run when Command.Timeout is zero.
const DefaultTimeout = time.Minute

// NewCmd is the constructor of a verb, like apply.NewCmdApply.
type NewCmd func(kube.Factory, genericiooptions.IOStreams) *cobra.Command

// Command is how a test runs "kubectl registry <args>".
type Command struct {
	// New are the verbs the root command gets.
	New []NewCmd
	// Factory, when set, is the Factory the verbs get (a kubefake.Factory); else they
	// get the Factory of the root's kubeconfig flags, as in plugin/root.go.
	Factory kube.Factory
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
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	root := c.root(out, errOut, args)
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

// root returns the root command that runs args with the verbs of c, writing to out and
// errOut.
func (c Command) root(out, errOut io.Writer, args []string) *cobra.Command {
	streams := genericiooptions.IOStreams{In: strings.NewReader(c.Stdin), Out: out, ErrOut: errOut}
	root, configFlags := newRoot()
	root.SetOut(out)
	root.SetErr(errOut)
	f := c.Factory
	if f == nil {
		f = kube.NewFactory(configFlags)
	}
	for _, newCmd := range c.New {
		root.AddCommand(newCmd(f, streams))
	}
	root.SetArgs(args)
	return root
}

// Running is a command that Command.Start started: a --watch.
type Running struct {
	// Out and ErrOut are what the command printed so far on stdout and stderr.
	Out, ErrOut *SyncBuffer

	cancel context.CancelFunc
	done   chan error
}

// Start runs "kubectl registry <args>" like Run, in the background and until Stop, with
// output that can be read while it runs.
func (c Command) Start(t testing.TB, args ...string) *Running {
	t.Helper()
	r := &Running{Out: &SyncBuffer{}, ErrOut: &SyncBuffer{}, done: make(chan error, 1)}
	root := c.root(r.Out, r.ErrOut, args)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- root.ExecuteContext(ctx) }()
	t.Cleanup(cancel)
	return r
}

// Stop cancels the command and returns its error; it fails the test when the command
// does not end within within.
func (r *Running) Stop(t testing.TB, within time.Duration) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(within):
		t.Fatalf("the command did not end within %s of the cancel", within)
		return nil
	}
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

// Len returns how many bytes were written so far.
func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
