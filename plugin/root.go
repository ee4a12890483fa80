// Package plugin is the kubectl plugin "kubectl registry": the cobra command tree, one
// package per verb. The binary that runs it is cmd/kubectl-registry.
package plugin

import (
	"fmt"
	"strings"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/apply"
	"github.com/kubectl-registry/kubectl-registry/plugin/completion"
	"github.com/kubectl-registry/kubectl-registry/plugin/create"
	"github.com/kubectl-registry/kubectl-registry/plugin/edit"
	"github.com/kubectl-registry/kubectl-registry/plugin/get"
	"github.com/kubectl-registry/kubectl-registry/plugin/install"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/plugin/join"
	"github.com/kubectl-registry/kubectl-registry/plugin/leave"
	"github.com/kubectl-registry/kubectl-registry/plugin/revoke"
	"github.com/kubectl-registry/kubectl-registry/plugin/serve"
	"github.com/kubectl-registry/kubectl-registry/plugin/status"
	"github.com/kubectl-registry/kubectl-registry/plugin/syncdiff"
	"github.com/kubectl-registry/kubectl-registry/plugin/uninstall"
	"github.com/kubectl-registry/kubectl-registry/plugin/version"
)

// DisplayName is how help and usage name the root command: kubectl runs the binary
// kubectl-registry for "kubectl registry".
const DisplayName = "kubectl registry"

const (
	rootShort = "Form a group of Kubernetes clusters and sync resources across them"

	rootLong = `
		kubectl-registry forms a group of Kubernetes clusters and syncs resources across them.

		It is one Go binary that works two ways:

		  * "kubectl registry ..." is a kubectl plugin: it forms the group of clusters, edits and
		    diffs the registry's custom resources (Cluster, ClusterFeature, ResourceSyncRule of
		    clusterregistry.k8s.cisco.com) across kubeconfig contexts, and shows what is synced
		    where.
		  * "kubectl registry serve" is the controller that runs in every member cluster. Each
		    controller reads its peers and writes only its own cluster; after one exchange of
		    credentials with any member, membership spreads to the whole group.

		The plugin reads your kubeconfig like kubectl does (--kubeconfig, --context, ...) and
		never changes its current context.`
)

// NewCmdRegistry returns the root command of the plugin, "kubectl registry". Its
// kubeconfig flags (--kubeconfig, --context, --namespace, ...) are persistent and shared
// with every subcommand. Errors are returned, never printed: the caller prints them and
// exits with ExitCode(err).
func NewCmdRegistry(streams genericiooptions.IOStreams) *cobra.Command {
	configFlags := genericclioptions.NewConfigFlags(true).
		WithDiscoveryBurst(300).
		WithDiscoveryQPS(50.0)
	// The one Factory of the tree: every verb resolves its contexts and builds its
	// clients through it, so a test hands the verbs a kubefake.Factory instead.
	f := kube.NewFactory(configFlags)

	cmd := &cobra.Command{
		Use:   "kubectl-registry",
		Short: rootShort,
		Long:  templates.LongDesc(rootLong),
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: DisplayName,
		},
		// Errors are printed once, by main, with a one-line usage hint when they are usage
		// errors; never the whole usage.
		SilenceUsage:               true,
		SilenceErrors:              true,
		SuggestionsMinimumDistance: 2,
		// The root is runnable so that cobra hands unknown subcommands to Args, which turns
		// them into usage errors (exit code 2).
		Args: unknownCommandArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
		CompletionOptions: cobra.CompletionOptions{
			// The "completion" verb is ours (plugin/completion), with exit codes like
			// every verb; kubectl completes "kubectl registry" through the executable
			// kubectl_complete-registry, which calls the hidden __complete command.
			DisableDefaultCmd: true,
		},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
	configFlags.AddFlags(cmd.PersistentFlags())

	addGroups(cmd, verbGroups(f, streams))
	cmd.AddCommand(
		version.NewCmdVersion(f, streams),
		completion.NewCmdCompletion(streams),
	)
	registerCompletions(cmd, f)
	return cmd
}

// verbGroups returns the verbs of the plugin, each built with the Factory f, grouped in
// help like kubectl's ("Basic Commands", ...): the groups are kubectl's
// templates.CommandGroups, shown through cobra's command groups so that help keeps
// listing the kubeconfig flags.
func verbGroups(f kube.Factory, streams genericiooptions.IOStreams) templates.CommandGroups {
	return templates.CommandGroups{
		{
			Message: "Form the group:",
			Commands: []*cobra.Command{
				install.NewCmdInstall(f, streams),
				join.NewCmdJoin(f, streams),
				leave.NewCmdLeave(f, streams),
				revoke.NewCmdRevoke(f, streams),
				uninstall.NewCmdUninstall(f, streams),
			},
		},
		{
			Message: "See the group:",
			Commands: []*cobra.Command{
				status.NewCmdStatus(f, streams),
				get.NewCmdGet(f, streams),
				syncdiff.NewCmdSyncDiff(f, streams),
			},
		},
		{
			Message: "Sync resources:",
			Commands: []*cobra.Command{
				create.NewCmdCreate(f, streams),
				apply.NewCmdApply(f, streams),
				edit.NewCmdEdit(f, streams),
			},
		},
		{
			Message:  "Run the controller:",
			Commands: []*cobra.Command{serve.NewCmdServe(f, streams)},
		},
	}
}

// addGroups adds the commands of groups to root, each group under its message in help.
func addGroups(root *cobra.Command, groups templates.CommandGroups) {
	for i, g := range groups {
		id := fmt.Sprintf("group-%d", i)
		root.AddGroup(&cobra.Group{ID: id, Title: g.Message})
		for _, c := range g.Commands {
			c.GroupID = id
		}
	}
	groups.Add(root)
}

// unknownCommandArgs rejects the positional arguments of the root command: the first
// one is an unknown subcommand.
func unknownCommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
		msg += "; did you mean " + strings.Join(quoteAll(suggestions), " or ") + "?"
	}
	return cmdutil.UsageError(cmd, fmt.Errorf("%s", msg))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
