package plugin

import "github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"

// Exit codes of the CLI. Every error exits with a code greater than 1, usage errors
// included, because comparing verbs (sync-diff, like kubectl diff) exit with 1 when they
// found differences.
const (
	ExitCodeOK          = cmdutil.ExitCodeOK
	ExitCodeDifferences = cmdutil.ExitCodeDifferences
	ExitCodeError       = cmdutil.ExitCodeError
)

// ExitError is an error that carries the exit code of the process:
//
//	return &plugin.ExitError{Code: plugin.ExitCodeDifferences} // exit 1, print nothing
//
// An ExitError with a nil Err prints nothing.
type ExitError = cmdutil.ExitError

// ExitCode returns the process exit code for the error a command returned: 0 for nil,
// the Code of the first *ExitError in its chain when positive, and 2 otherwise.
func ExitCode(err error) int { return cmdutil.ExitCode(err) }
