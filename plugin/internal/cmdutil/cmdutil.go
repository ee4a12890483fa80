// Package cmdutil holds what every verb of the plugin shares: the error that carries the
// process exit code, and helpers that turn cobra's usage errors into such errors.
package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of the CLI. Every error exits with a code greater than 1, because a verb
// that compares (sync-diff, like kubectl diff) exits with 1 when it found differences.
const (
	// ExitCodeOK is returned when the command succeeded.
	ExitCodeOK = 0
	// ExitCodeDifferences is returned by comparing verbs when they found differences.
	ExitCodeDifferences = 1
	// ExitCodeError is the exit code of every error that does not carry another code,
	// usage errors included.
	ExitCodeError = 2
)

// ExitError is an error that carries the exit code of the process. An ExitError with a
// nil Err exits with Code and prints nothing (e.g. "differences found").
type ExitError struct {
	Code int
	Err  error
}

// Error returns the message of the wrapped error, or "" when there is none.
func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the process exit code for err: 0 for nil, the Code of the first
// *ExitError in err's chain when it is positive, and ExitCodeError (2) otherwise.
func ExitCode(err error) int {
	if err == nil {
		return ExitCodeOK
	}
	if ee, ok := errors.AsType[*ExitError](err); ok && ee.Code > 0 {
		return ee.Code
	}
	return ExitCodeError
}

// UsageError wraps err, a misuse of cmd (bad flag, argument or flag value), in an
// *ExitError with code 2 whose message ends with a one-line hint pointing at the help of
// cmd: "See 'kubectl registry version --help' for usage."
func UsageError(cmd *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*ExitError](err); ok {
		return err
	}
	return &ExitError{Code: ExitCodeError, Err: &usageError{err: err, hint: UsageHint(cmd)}}
}

// UsageErrorf is UsageError with a formatted message.
func UsageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return UsageError(cmd, fmt.Errorf(format, args...))
}

// UsageHint returns the one-line hint that points at the help of cmd.
func UsageHint(cmd *cobra.Command) string {
	return fmt.Sprintf("See '%s --help' for usage.", cmd.CommandPath())
}

type usageError struct {
	err  error
	hint string
}

func (e *usageError) Error() string {
	return strings.TrimRight(e.err.Error(), "\n") + "\n" + e.hint
}

func (e *usageError) Unwrap() error { return e.err }

// FlagErrorFunc is a cobra FlagErrorFunc that turns flag parsing errors into usage errors.
func FlagErrorFunc(cmd *cobra.Command, err error) error {
	return UsageError(cmd, err)
}

// NoArgs is a cobra.PositionalArgs that rejects every positional argument with a usage
// error.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return UsageErrorf(cmd, "unexpected argument %q: %q takes no arguments", args[0], cmd.CommandPath())
	}
	return nil
}

// UsageErrorArgs wraps a cobra.PositionalArgs so that the errors it returns are usage
// errors.
func UsageErrorArgs(args cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		return UsageError(cmd, args(cmd, a))
	}
}

// Command is a verb in kubectl's pattern: Complete fills what follows from the flags and
// the arguments, Validate checks the options without I/O, Run does the work.
type Command interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// RunE returns a cobra RunE that runs o's Complete, Validate and Run; a Validate error is
// a usage error (exit code 2, with the hint to --help).
func RunE(o Command) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return UsageError(cmd, err)
		}
		return o.Run(cmd.Context())
	}
}
