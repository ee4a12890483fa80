package plugin

import (
	"github.com/spf13/cobra"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/completion"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
)

// registerCompletions gives the flags and arguments of the command tree their dynamic
// completions, in one place (docs/completion.md lists them):
//
//   - --context, --peer-context: kubeconfig contexts; --contexts: a comma-separated list
//     of them; --cluster and --user: the kubeconfig's clusters and users (no network);
//   - leave CLUSTER, revoke CLUSTER and get --clusters: the Cluster CRs of the current
//     context;
//   - edit TYPE NAME: rsr|cf, then the rules or features; sync-diff RULE...: the rules;
//   - get RESOURCE: the kinds the API server serves (discovery).
//
// What reads an API server gives up after completion.Timeout and then offers nothing.
func registerCompletions(root *cobra.Command, flags kube.Factory) {
	register := func(cmd *cobra.Command, flag string, f cobra.CompletionFunc) {
		if cmd.Flags().Lookup(flag) == nil && cmd.PersistentFlags().Lookup(flag) == nil {
			return
		}
		// The only error is a flag registered twice or missing: a programming error
		// that the completion tests catch.
		_ = cmd.RegisterFlagCompletionFunc(flag, f)
	}
	register(root, "context", completion.Contexts(flags))
	register(root, "cluster", completion.KubeconfigClusters(flags))
	register(root, "user", completion.KubeconfigUsers(flags))
	for _, cmd := range root.Commands() {
		register(cmd, "contexts", completion.ContextList(flags))
		register(cmd, "peer-context", completion.Contexts(flags))
		switch cmd.Name() {
		case "leave", "revoke":
			cmd.ValidArgsFunction = completion.FirstArg(completion.ClusterNames(flags))
		case "get":
			cmd.ValidArgsFunction = completion.Kinds(flags)
			register(cmd, "clusters", completion.List(completion.ClusterNames(flags)))
		case "edit":
			cmd.ValidArgsFunction = completion.EditArgs(flags)
		case "sync-diff":
			cmd.ValidArgsFunction = completion.RuleNames(flags)
		}
	}
	noFiles(root)
}

// noFiles makes the commands that complete no argument offer no file names either.
func noFiles(cmd *cobra.Command) {
	if cmd.ValidArgsFunction == nil && cmd.ValidArgs == nil {
		cmd.ValidArgsFunction = cobra.NoFileCompletions
	}
	for _, c := range cmd.Commands() {
		noFiles(c)
	}
}
