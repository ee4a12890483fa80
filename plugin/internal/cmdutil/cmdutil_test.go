package cmdutil

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain error", errors.New("boom"), 2},
		{"exit error", &ExitError{Code: 3, Err: errors.New("boom")}, 3},
		{"differences", &ExitError{Code: ExitCodeDifferences}, 1},
		{"wrapped exit error", fmt.Errorf("context: %w", &ExitError{Code: 4, Err: errors.New("boom")}), 4},
		{"non-positive code", &ExitError{Code: 0, Err: errors.New("boom")}, 2},
		{"usage error", UsageErrorf(&cobra.Command{Use: "x"}, "bad"), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestUsageError(t *testing.T) {
	root := &cobra.Command{Use: "kubectl-registry", Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl registry"}}
	sub := &cobra.Command{Use: "version"}
	root.AddCommand(sub)
	inner := errors.New("bad flag")

	err := UsageError(sub, inner)
	want := "bad flag\nSee 'kubectl registry version --help' for usage."
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("message mismatch (-want +got):\n%s", diff)
	}
	if !errors.Is(err, inner) {
		t.Errorf("UsageError does not wrap its error")
	}
	if UsageError(sub, nil) != nil {
		t.Errorf("UsageError(nil) is not nil")
	}
	exit := &ExitError{Code: 5, Err: inner}
	if got := UsageError(sub, exit); got != exit {
		t.Errorf("UsageError re-wrapped an ExitError: %v", got)
	}
	if got := (&ExitError{Code: 1}).Error(); got != "" {
		t.Errorf("silent ExitError has message %q", got)
	}
}
