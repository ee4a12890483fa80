package cmdutil

import (
	"fmt"
	"strings"
)

// ContextError is what went wrong on one kubeconfig context of a verb that works on
// several.
type ContextError struct {
	Context string
	// Errs are the failures on the context, in the order they happened.
	Errs []error
}

// Error names the context and every failure, on one line.
func (e *ContextError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return e.Context + ": " + strings.Join(msgs, "; ")
}

// Unwrap returns the failures.
func (e *ContextError) Unwrap() []error { return e.Errs }

// ContextsError is the failure of a verb on some of the contexts it worked on. Its
// message is one line that names each failed context with its reasons, then Hint on a
// line of its own when there is one:
//
//	applying failed on 2 of 3 contexts: east, west (east: ...; west: ...)
type ContextsError struct {
	// Doing names the work, e.g. "applying".
	Doing string
	// Total is how many contexts the verb worked on.
	Total int
	// Failed are the contexts that failed, in the order of the contexts.
	Failed []*ContextError
	// Hint, when set, tells the user what to do next.
	Hint string
}

func (e *ContextsError) Error() string {
	names := make([]string, len(e.Failed))
	details := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		names[i] = f.Context
		details[i] = f.Error()
	}
	msg := fmt.Sprintf("%s failed on %d of %d contexts: %s (%s)", e.Doing, len(e.Failed), e.Total, strings.Join(names, ", "), strings.Join(details, "; "))
	if e.Hint != "" {
		msg += "\n" + e.Hint
	}
	return msg
}

// Unwrap returns the failure of each context.
func (e *ContextsError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f
	}
	return errs
}
