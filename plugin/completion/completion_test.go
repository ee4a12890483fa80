package completion

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
)

func TestValidate(t *testing.T) {
	cases := []plugintest.ValidateCase[*Options]{
		{Name: "unknown shell", Modify: func(o *Options) { o.Shell = "tcsh" }, Want: []string{`unsupported shell "tcsh": must be one of (bash, zsh, fish, powershell)`}},
	}
	for _, s := range Shells() {
		cases = append(cases, plugintest.ValidateCase[*Options]{Name: s, Modify: func(o *Options) { o.Shell = s }})
	}
	plugintest.RunValidate(t, func() *Options { return &Options{} }, cases)
}

// TestRun completes the shell from the argument and prints a script for the root.
func TestRun(t *testing.T) {
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	root := &cobra.Command{Use: "kubectl-registry"}
	cmd := NewCmdCompletion(streams)
	root.AddCommand(cmd)
	o := &Options{IOStreams: streams}
	if err := o.Complete(cmd, []string{"bash"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := o.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kubectl-registry") || !strings.Contains(out.String(), "bash") {
		t.Errorf("not a bash completion script for kubectl-registry:\n%.300s", out)
	}
}
