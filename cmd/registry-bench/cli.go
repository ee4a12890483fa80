package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// cliTiming is a CLI command of the built binary, timed over several runs.
type cliTiming struct {
	Command  string `json:"command"`
	Clusters int    `json:"clusters"`
	// Objects are the matching objects the command goes through (sync-diff: the synced
	// ConfigMaps of the rule; get: the rows it printed).
	Objects       int       `json:"objects"`
	RunsSeconds   []float64 `json:"runs_seconds"`
	MedianSeconds float64   `json:"median_seconds"`
	ExitCode      int       `json:"exit_code"`
	OutputLines   int       `json:"output_lines"`
	// Error is the tail of stderr when the command failed (exit code > 1).
	Error string `json:"error,omitempty"`
}

// timeCLI runs the kubectl-registry binary with args (and the group's kubeconfig) runs
// times, from process start to exit, and reports the median. A failure is recorded, not
// returned: the bench goes on.
func (g *group) timeCLI(ctx context.Context, runs int, args ...string) cliTiming {
	t := cliTiming{Command: "kubectl registry " + strings.Join(args, " ")}
	full := append(slices.Clone(args), "--kubeconfig", g.kubeconfig)
	for range runs {
		var out, errOut bytes.Buffer
		cmd := exec.CommandContext(ctx, g.b.bin, full...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		t0 := time.Now()
		err := cmd.Run()
		d := time.Since(t0)
		t.ExitCode = 0
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			t.ExitCode = exit.ExitCode()
		case err != nil:
			t.ExitCode, t.Error = -1, err.Error()
			return t
		}
		if t.ExitCode > 1 {
			t.Error = tail(errOut.String(), 1000)
		}
		t.RunsSeconds = append(t.RunsSeconds, d.Seconds())
		t.OutputLines = strings.Count(out.String(), "\n")
	}
	s := slices.Clone(t.RunsSeconds)
	slices.Sort(s)
	t.MedianSeconds = s[len(s)/2]
	return t
}
