// Package completion holds the dynamic shell completions of the plugin: kubeconfig
// contexts (read from the kubeconfig, no network), and the names the API server of the
// current context knows (Cluster CRs, ResourceSyncRules, ClusterFeatures, resource
// kinds), each read within Timeout.
//
// A completion never fails loudly: on any error it returns no candidates with
// cobra.ShellCompDirectiveNoFileComp, prints nothing and returns within Timeout.
package completion

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Timeout bounds everything one completion asks of an API server. A completion that
// does not get its answer within it offers nothing.
const Timeout = 2 * time.Second

// noFile is the directive of every completion: the shell never falls back to file names.
const noFile = cobra.ShellCompDirectiveNoFileComp

// The registry's resources that completions list.
func clustersResource() schema.GroupVersionResource {
	return v1alpha1.GroupVersion.WithResource("clusters")
}

func rulesResource() schema.GroupVersionResource {
	return v1alpha1.GroupVersion.WithResource("resourcesyncrules")
}

func featuresResource() schema.GroupVersionResource {
	return v1alpha1.GroupVersion.WithResource("clusterfeatures")
}

// ClusterNames completes the name of a Cluster CR of the current context.
func ClusterNames(factory kube.Factory) cobra.CompletionFunc {
	return Names(factory, clustersResource(), false)
}

// RuleNames completes the names of ResourceSyncRules, leaving out those already given
// as arguments.
func RuleNames(factory kube.Factory) cobra.CompletionFunc {
	return Names(factory, rulesResource(), true)
}

// Collections are the resource arguments of get that stand for several kinds.
func Collections() []string { return []string{"workloads"} }

// filter keeps the candidates that start with prefix and are not in skip, sorted and
// without duplicates.
func filter(candidates []string, prefix string, skip []string) []string {
	var out []string
	for _, c := range candidates {
		if strings.HasPrefix(c, prefix) && !slices.Contains(skip, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// keys returns the keys of a kubeconfig map.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Contexts completes one kubeconfig context name (--context, --peer-context).
func Contexts(factory kube.Factory) cobra.CompletionFunc {
	return fromKubeconfig(factory, func(c clientcmdapi.Config) []string { return keys(c.Contexts) })
}

// KubeconfigClusters completes a kubeconfig cluster name (--cluster).
func KubeconfigClusters(factory kube.Factory) cobra.CompletionFunc {
	return fromKubeconfig(factory, func(c clientcmdapi.Config) []string { return keys(c.Clusters) })
}

// KubeconfigUsers completes a kubeconfig user name (--user).
func KubeconfigUsers(factory kube.Factory) cobra.CompletionFunc {
	return fromKubeconfig(factory, func(c clientcmdapi.Config) []string { return keys(c.AuthInfos) })
}

func fromKubeconfig(factory kube.Factory, names func(clientcmdapi.Config) []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		raw, err := factory.RawConfig()
		if err != nil {
			return nil, noFile
		}
		return filter(names(raw), toComplete, nil), noFile
	}
}

// ContextList completes the last element of a comma-separated list of contexts
// (--contexts a,b,<TAB>), leaving out those already listed.
func ContextList(factory kube.Factory) cobra.CompletionFunc {
	return List(Contexts(factory))
}

// List turns a completion of one value into a completion of the last element of a
// comma-separated list of values: "a,b,c<TAB>" completes c among the candidates not
// already listed, and offers "a,b,candidate".
func List(one cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		listed, last := "", toComplete
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			listed, last = toComplete[:i+1], toComplete[i+1:]
		}
		candidates, directive := one(cmd, args, last)
		done := strings.Split(strings.TrimSuffix(listed, ","), ",")
		var out []string
		for _, c := range candidates {
			if !slices.Contains(done, c) {
				out = append(out, listed+c)
			}
		}
		return out, directive
	}
}

// clients returns the Factory and the target completions use: the first context of the
// command's --contexts when set, else the one of the root's flags (--context, or the
// current context); with options that bound each request by Timeout and drop warnings.
func clients(cmd *cobra.Command, factory kube.Factory) (kube.Factory, kube.Target, kube.ClientOptions, error) {
	f := factory
	opts := kube.ClientOptions{Verb: "completion", Timeout: Timeout, Warnings: io.Discard}
	contexts, _ := cmd.Flags().GetStringSlice("contexts")
	if fl := cmd.Flags().Lookup("contexts"); fl != nil && fl.Changed && len(contexts) > 0 && contexts[0] != "" {
		t, err := f.Target(contexts[0])
		return f, t, opts, err
	}
	targets, err := f.Targets(cmd, nil)
	if err != nil {
		return nil, kube.Target{}, opts, err
	}
	return f, targets[0], opts, nil
}

// ListNames lists the names of the objects of a cluster-scoped resource of the registry
// through the clients of cmd (see clients), within Timeout.
func ListNames(ctx context.Context, cmd *cobra.Command, factory kube.Factory, gvr schema.GroupVersionResource) ([]string, error) {
	f, t, opts, err := clients(cmd, factory)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	dc, err := f.Dynamic(t, opts)
	if err != nil {
		return nil, err
	}
	list, err := dc.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, item := range list.Items {
		names = append(names, item.GetName())
	}
	return names, nil
}

// commandContext is the context of the command being completed, or Background.
func commandContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// Names completes the name of an object of a registry resource (Cluster, rule,
// feature) read from the API server; skipArgs leaves out the names already given as
// arguments.
func Names(factory kube.Factory, gvr schema.GroupVersionResource, skipArgs bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		names, err := ListNames(commandContext(cmd), cmd, factory, gvr)
		if err != nil {
			return nil, noFile
		}
		var skip []string
		if skipArgs {
			skip = args
		}
		return filter(names, toComplete, skip), noFile
	}
}

// FirstArg completes the first positional argument with f and offers nothing after it.
func FirstArg(f cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, noFile
		}
		return f(cmd, args, toComplete)
	}
}

// editTypes are the TYPE arguments edit offers, and the resource each names.
func editTypes() map[string]schema.GroupVersionResource {
	return map[string]schema.GroupVersionResource{
		"rsr":              rulesResource(),
		"resourcesyncrule": rulesResource(),
		"cf":               featuresResource(),
		"clusterfeature":   featuresResource(),
	}
}

// EditArgs completes "edit TYPE NAME" and "edit TYPE/NAME": the TYPE (rsr, cf, ...),
// then the names of the rules or features.
func EditArgs(factory kube.Factory) cobra.CompletionFunc {
	types := editTypes()
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch {
		case len(args) == 0 && strings.Contains(toComplete, "/"):
			typ, name, _ := strings.Cut(toComplete, "/")
			gvr, ok := types[strings.ToLower(typ)]
			if !ok {
				return nil, noFile
			}
			names, directive := Names(factory, gvr, false)(cmd, args, name)
			for i := range names {
				names[i] = typ + "/" + names[i]
			}
			return names, directive
		case len(args) == 0:
			return filter(keys(types), toComplete, nil), noFile
		case len(args) == 1:
			gvr, ok := types[strings.ToLower(args[0])]
			if !ok {
				return nil, noFile
			}
			return Names(factory, gvr, false)(cmd, args, toComplete)
		}
		return nil, noFile
	}
}

// Kinds completes the RESOURCE argument of get: the resources the API server serves
// that can be listed (plural, or plural.group outside the core group), and the
// collections; a comma-separated list completes its last element.
func Kinds(factory kube.Factory) cobra.CompletionFunc {
	one := func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		names, err := ResourceNames(commandContext(cmd), cmd, factory)
		if err != nil {
			return nil, noFile
		}
		return filter(append(names, Collections()...), toComplete, nil), noFile
	}
	return FirstArg(List(one))
}

// ResourceNames lists, through discovery within Timeout, the resources that can be
// listed: "configmaps", "deployments.apps".
func ResourceNames(ctx context.Context, cmd *cobra.Command, factory kube.Factory) ([]string, error) {
	f, t, opts, err := clients(cmd, factory)
	if err != nil {
		return nil, err
	}
	dc, err := f.Discovery(t, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	type result struct {
		lists []*metav1.APIResourceList
		err   error
	}
	// Discovery takes no context: it runs aside, bounded by the config's Timeout per
	// request, and this call returns at the deadline whatever it does.
	ch := make(chan result, 1)
	go func() {
		lists, err := dc.ServerPreferredResources()
		ch <- result{lists, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if len(r.lists) == 0 && r.err != nil {
		return nil, r.err
	}
	var names []string
	for _, l := range r.lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range l.APIResources {
			if strings.Contains(res.Name, "/") || !slices.Contains(res.Verbs, "list") {
				continue
			}
			name := res.Name
			if gv.Group != "" {
				name += "." + gv.Group
			}
			names = append(names, name)
		}
	}
	return names, nil
}
