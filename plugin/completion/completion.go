// Package completion implements "kubectl registry completion SHELL": the shell
// completion script of the kubectl-registry binary, from cobra's generators.
package completion

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
)

const (
	completionLong = `
		Print the shell completion script of kubectl-registry for bash, zsh, fish or
		powershell.

		Two ways to complete:

		  * "kubectl registry <TAB>": kubectl (1.26 or later) completes plugins itself when
		    kubectl's own completion is loaded and the executable kubectl_complete-registry,
		    shipped with the plugin, is on PATH. Nothing else to do.
		  * "kubectl-registry <TAB>": load the script this command prints.

		Completion offers the verbs and flags, the contexts of your kubeconfig (--context,
		--contexts, --peer-context), and names read from the API server of the current
		context: Clusters (leave, revoke, get --clusters), rules and features (edit,
		sync-diff) and resource kinds (get). What needs the API server gives up after 2
		seconds and offers nothing.`

	completionExample = `
		# bash: this shell, then every new one
		source <(kubectl registry completion bash)
		kubectl registry completion bash > ~/.local/share/bash-completion/completions/kubectl-registry

		# zsh
		kubectl registry completion zsh > "${fpath[1]}/_kubectl-registry"

		# fish
		kubectl registry completion fish > ~/.config/fish/completions/kubectl-registry.fish

		# powershell
		kubectl registry completion powershell | Out-String | Invoke-Expression`
)

// Shells are the shells a script can be generated for.
func Shells() []string { return []string{"bash", "zsh", "fish", "powershell"} }

// Options holds the state of "kubectl registry completion".
type Options struct {
	// Shell is the SHELL argument.
	Shell string
	// NoDescriptions leaves the descriptions out of the candidates.
	NoDescriptions bool

	root *cobra.Command
	genericiooptions.IOStreams
}

// NewCmdCompletion returns the "completion" command.
func NewCmdCompletion(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams}
	cmd := &cobra.Command{
		Use:                   "completion (bash|zsh|fish|powershell)",
		Short:                 "Print the shell completion script of kubectl-registry",
		Long:                  templates.LongDesc(completionLong),
		Example:               templates.Examples(completionExample),
		DisableFlagsInUseLine: true,
		ValidArgs:             Shells(),
		Args:                  cmdutil.UsageErrorArgs(cobra.ExactArgs(1)),
		RunE:                  cmdutil.RunE(o),
	}
	cmd.Flags().BoolVar(&o.NoDescriptions, "no-descriptions", o.NoDescriptions, "Leave the descriptions out of the candidates.")
	return cmd
}

// Complete takes the shell and the root command whose script is generated.
func (o *Options) Complete(cmd *cobra.Command, args []string) error {
	o.Shell = args[0]
	o.root = cmd.Root()
	return nil
}

// Validate checks the shell.
func (o *Options) Validate() error {
	if !slices.Contains(Shells(), o.Shell) {
		return fmt.Errorf("unsupported shell %q: must be one of (%s)", o.Shell, strings.Join(Shells(), ", "))
	}
	return nil
}

// Run prints the script.
func (o *Options) Run(context.Context) error {
	desc := !o.NoDescriptions
	var err error
	switch o.Shell {
	case "bash":
		err = o.root.GenBashCompletionV2(o.Out, desc)
	case "zsh":
		if desc {
			err = o.root.GenZshCompletion(o.Out)
		} else {
			err = o.root.GenZshCompletionNoDesc(o.Out)
		}
	case "fish":
		err = o.root.GenFishCompletion(o.Out, desc)
	case "powershell":
		if desc {
			err = o.root.GenPowerShellCompletionWithDesc(o.Out)
		} else {
			err = o.root.GenPowerShellCompletion(o.Out)
		}
	}
	if err != nil {
		return fmt.Errorf("writing the %s completion script: %w", o.Shell, err)
	}
	return nil
}
