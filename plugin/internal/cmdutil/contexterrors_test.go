package cmdutil

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestContextsError: the error of a verb that failed on some contexts names each of them
// with its reasons, on one line, and keeps them in its chain.
func TestContextsError(t *testing.T) {
	errRefused := errors.New("cannot reach the API server at https://10.0.0.2:6443: connection refused")
	errInvalid := errors.New("applying clusterfeature/x: spec.featureName is invalid")
	errOther := errors.New("applying resourcesyncrule/y: forbidden")
	tests := []struct {
		name string
		err  *ContextsError
		want string
	}{
		{
			name: "one context",
			err:  &ContextsError{Doing: "applying", Total: 2, Failed: []*ContextError{{Context: "west", Errs: []error{errRefused}}}},
			want: "applying failed on 1 of 2 contexts: west (west: " + errRefused.Error() + ")",
		},
		{
			name: "two contexts, two failures on one",
			err: &ContextsError{Doing: "applying", Total: 3, Failed: []*ContextError{
				{Context: "east", Errs: []error{errInvalid, errOther}},
				{Context: "west", Errs: []error{errRefused}},
			}},
			want: "applying failed on 2 of 3 contexts: east, west (east: " + errInvalid.Error() + "; " + errOther.Error() + "; west: " + errRefused.Error() + ")",
		},
		{
			name: "hint",
			err:  &ContextsError{Doing: "editing", Total: 1, Failed: []*ContextError{{Context: "east", Errs: []error{errInvalid}}}, Hint: "retry with: kubectl registry apply"},
			want: "editing failed on 1 of 1 contexts: east (east: " + errInvalid.Error() + ")\nretry with: kubectl registry apply",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			for _, f := range tt.err.Failed {
				for _, e := range f.Errs {
					if !errors.Is(tt.err, e) {
						t.Errorf("%v is not in the chain of the error", e)
					}
				}
			}
		})
	}
}
