// Package get implements "kubectl registry get": the Clusterpedia-style search of one
// kind of resource (or a collection of kinds) across the clusters of the group, printed
// like "kubectl get" with a CLUSTER column first.
//
// The clusters are reached through the contexts of the user's kubeconfig and queried in
// parallel; each context is named by the registry Cluster CR that describes its cluster
// (the local Cluster whose spec.clusterID is the cluster's kube-system namespace UID).
package get

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
)

// ClusterAnnotation is set on every item of the List printed by -o yaml|json (and
// the other object formats): the registry Cluster name the item was read from.
const ClusterAnnotation = "kubectl-registry.k8s.io/cluster"

// DefaultClusterTimeout bounds everything get asks of one cluster.
const DefaultClusterTimeout = 10 * time.Second

// collections are resource arguments that stand for several kinds.
var collections = map[string][]string{
	"workloads": {"deployments.apps", "daemonsets.apps", "statefulsets.apps"},
}

const (
	getLong = `
		Search resources across the clusters of the group and print them like "kubectl get",
		with a CLUSTER column first (and NAMESPACE second with --all-namespaces).

		Clusters are reached through the contexts of your kubeconfig: by default every
		context whose cluster has the registry installed (the Cluster CRD is served), or the
		contexts of --contexts, or the one of --context. Each context is shown under the
		name of its registry Cluster: the local Cluster CR (status.type Local) whose
		spec.clusterID is the UID of the cluster's kube-system namespace. When a context has no such Cluster, the context name
		is used and a warning says so. --clusters keeps only the named Clusters. Two contexts
		that reach the same cluster are queried once.

		Clusters are queried in parallel, each within --cluster-timeout. A cluster that fails
		is reported on stderr ("error: cluster NAME: ...") and the others are still printed;
		get then exits with code 2.

		RESOURCE is a resource type as kubectl takes it (plural, singular, short name or
		resource.group), several separated by commas, or the collection "workloads"
		(deployments, daemonsets and statefulsets).

		Tables are the API servers' own (server-side printing), so every column kubectl
		shows is there; -o wide adds the columns of lower priority. --sort-by takes a
		JSONPath like kubectl's and sorts the rows of all clusters together (ties keep
		CLUSTER order); --limit keeps the first N rows after sorting.

		-o yaml and -o json print one v1 List whose items each carry the annotation
		"kubectl-registry.k8s.io/cluster: NAME" with the Cluster they were read from.

		--watch (-w) keeps running: it watches the listed resources on every cluster searched
		and prints everything again on every change, like "kubectl get -w" (on a terminal
		each print replaces the last). Errors go to stderr when they change; Ctrl-C ends it.`

	getExample = `
		# Config maps labelled app=web in every namespace of every cluster
		kubectl registry get configmaps -A -l app=web

		# Deployments, daemon sets and stateful sets of the namespace default
		kubectl registry get workloads -n default

		# Only the clusters east and west, newest pods first, ten rows
		kubectl registry get pods -A --clusters east,west --sort-by .metadata.creationTimestamp --limit 10

		# As a List with the cluster of each item in an annotation
		kubectl registry get deployments -n default -o json

		# Follow the pods of every cluster as they change
		kubectl registry get pods -A -w`
)

// Options holds the flags and the state of "kubectl registry get".
type Options struct {
	AllNamespaces  bool
	LabelSelector  string
	FieldSelector  string
	SortBy         string
	Limit          int64
	NoHeaders      bool
	Contexts       []string
	Clusters       []string
	ClusterTimeout time.Duration
	// Watch prints again whenever the listed objects change (--watch).
	Watch bool

	PrintFlags *genericclioptions.PrintFlags

	// Set by Complete.
	resources     []string // resource arguments, collections expanded
	names         []string
	wide          bool
	printer       printers.ResourcePrinter // nil for tables
	sortPath      *jsonpath.JSONPath
	targets       []target
	explicitCtx   bool
	namespaceFlag string // -n when given

	// Factory reads the kubeconfig and builds the clients.
	Factory kube.Factory
	genericiooptions.IOStreams
}

// target is one kubeconfig context to query.
type target struct {
	context   string
	namespace string // the namespace to list when not --all-namespaces
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		ClusterTimeout: DefaultClusterTimeout,
		PrintFlags:     genericclioptions.NewPrintFlags(""),
		Factory:        f,
		IOStreams:      streams,
	}
}

// NewCmdGet returns the "get" command. f is the Factory of the root command's
// kubeconfig flags: its kubeconfig lists the contexts, its --namespace is the namespace to search.
func NewCmdGet(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdGet(NewOptions(f, streams))
}

// newCmdGet returns the "get" command of o.
func newCmdGet(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get RESOURCE [NAME...] [flags]",
		Short:   "Search resources across the clusters of the group, with a CLUSTER column",
		Long:    templates.LongDesc(getLong),
		Example: templates.Examples(getExample),
		Args:    resourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return cmdutil.UsageError(cmd, err)
			}
			if err := o.Validate(); err != nil {
				return cmdutil.UsageError(cmd, err)
			}
			return o.Run(cmd.Context())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of get to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces,
		"List the requested objects across all namespaces (the namespace of each context, or --namespace, is ignored).")
	fs.StringVarP(&o.LabelSelector, "selector", "l", o.LabelSelector,
		"Label selector to filter on, like kubectl's (e.g. -l key1=value1,key2=value2).")
	fs.StringVar(&o.FieldSelector, "field-selector", o.FieldSelector,
		"Field selector to filter on, like kubectl's (e.g. --field-selector metadata.name=x).")
	fs.StringVar(&o.SortBy, "sort-by", o.SortBy,
		"Sort the rows of all clusters by this JSONPath expression (e.g. '{.metadata.name}' or .metadata.name); ties keep CLUSTER order.")
	fs.Int64Var(&o.Limit, "limit", o.Limit,
		"Print at most this many rows (or items) in all, after sorting; 0 means no limit.")
	fs.BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders,
		"Print no header line in table output.")
	fs.StringSliceVar(&o.Contexts, "contexts", o.Contexts,
		"Kubeconfig contexts to search (default: every context whose cluster has the registry installed).")
	fs.StringSliceVar(&o.Clusters, "clusters", o.Clusters,
		"Keep only these registry Clusters (by Cluster name, or context name where a context has no Cluster).")
	fs.DurationVar(&o.ClusterTimeout, "cluster-timeout", o.ClusterTimeout,
		"How long to wait for each cluster.")
	fs.BoolVarP(&o.Watch, "watch", "w", o.Watch,
		"After printing, watch the listed resources on every cluster and print again on every change (Ctrl-C ends).")
	o.PrintFlags.AddFlags(cmd)
	if f := fs.Lookup("output"); f != nil {
		f.Usage = "Output format: wide, " + strings.Join(o.PrintFlags.AllowedFormats(), ", ") + ". Default: a table."
	}
}

// resourceArgs requires the RESOURCE argument, with kubectl's message when it is missing.
func resourceArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmdutil.UsageErrorf(cmd, "you must specify the type of resource to get (e.g. pods, or the collection workloads)")
	}
	return nil
}

// Complete derives the state of the flags and reads the kubeconfig. It contacts no API
// server.
func (o *Options) Complete(cmd *cobra.Command, args []string) error {
	o.completeResources(args[0])
	o.names = args[1:]
	if err := o.completeOutput(); err != nil {
		return err
	}
	if err := o.completeSortBy(); err != nil {
		return err
	}
	return o.completeTargets(cmd)
}

// completeResources sets the resources of the comma-separated list arg, the collections
// in it expanded.
func (o *Options) completeResources(arg string) {
	for r := range strings.SplitSeq(arg, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if members, ok := collections[strings.ToLower(r)]; ok {
			o.resources = append(o.resources, members...)
			continue
		}
		o.resources = append(o.resources, r)
	}
}

// completeOutput sets the output of -o: a table, a wide table or a printer.
func (o *Options) completeOutput() error {
	output := ""
	if o.PrintFlags.OutputFormat != nil {
		output = *o.PrintFlags.OutputFormat
	}
	switch output {
	case "":
	case "wide":
		o.wide = true
	default:
		p, err := o.PrintFlags.ToPrinter()
		if err != nil {
			return err
		}
		o.printer = p
	}
	return nil
}

// completeSortBy parses --sort-by, when given.
func (o *Options) completeSortBy() error {
	if o.SortBy == "" {
		return nil
	}
	expr, err := relaxedJSONPath(o.SortBy)
	if err != nil {
		return err
	}
	jp := jsonpath.New("sort-by").AllowMissingKeys(true)
	if err := jp.Parse(expr); err != nil {
		return fmt.Errorf("--sort-by %q: %w", o.SortBy, err)
	}
	o.sortPath = jp
	return nil
}

// completeTargets sets the contexts to query and the namespace of each: those of
// --context or --contexts, or every context of the kubeconfig, in the namespace of -n
// or else of the context.
func (o *Options) completeTargets(cmd *cobra.Command) error {
	if f := cmd.Flag("namespace"); f != nil && f.Changed {
		o.namespaceFlag = f.Value.String()
	}
	raw, err := o.Factory.RawConfig()
	if err != nil {
		return err
	}
	// --context narrows the search to that one context, like --contexts with one name;
	// it is never silently ignored.
	contextFlag := ""
	if f := cmd.Flag("context"); f != nil {
		contextFlag = f.Value.String()
	}
	contexts := o.Contexts
	flagName := "--contexts"
	if contextFlag != "" {
		if len(contexts) > 0 {
			return errors.New("--context and --contexts cannot be used together")
		}
		contexts = []string{contextFlag}
		flagName = "--context"
	}
	o.explicitCtx = len(contexts) > 0
	if !o.explicitCtx {
		for name := range raw.Contexts {
			contexts = append(contexts, name)
		}
		slices.Sort(contexts)
	}
	seen := map[string]bool{}
	for _, name := range contexts {
		if seen[name] {
			continue
		}
		seen[name] = true
		kctx, ok := raw.Contexts[name]
		if !ok {
			return fmt.Errorf("%s: context %q not found in the kubeconfig", flagName, name)
		}
		ns := o.namespaceFlag
		if ns == "" {
			ns = kctx.Namespace
		}
		if ns == "" {
			ns = "default"
		}
		o.targets = append(o.targets, target{context: name, namespace: ns})
	}
	return nil
}

// Validate checks the options. It is pure.
func (o *Options) Validate() error {
	var errs []error
	if len(o.resources) == 0 {
		errs = append(errs, errors.New("you must specify the type of resource to get"))
	}
	if o.Limit < 0 {
		errs = append(errs, fmt.Errorf("--limit must not be negative, got %d", o.Limit))
	}
	if o.ClusterTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--cluster-timeout must be positive, got %s", o.ClusterTimeout))
	}
	if len(o.names) > 0 && o.LabelSelector != "" {
		errs = append(errs, errors.New("name cannot be provided when a selector is specified"))
	}
	if len(o.names) > 0 && o.AllNamespaces {
		errs = append(errs, errors.New("a resource cannot be retrieved by name across all namespaces"))
	}
	if len(o.targets) == 0 {
		errs = append(errs, errors.New("the kubeconfig has no context"))
	}
	return errors.Join(errs...)
}

var relaxedJSONPathRegexp = regexp.MustCompile(`^\{?(\.?[^{}]*)\}?$`)

// relaxedJSONPath turns ".a.b", "a.b" or "{.a.b}" into "{.a.b}", like kubectl's
// --sort-by.
func relaxedJSONPath(expr string) (string, error) {
	expr = strings.TrimSpace(expr)
	m := relaxedJSONPathRegexp.FindStringSubmatch(expr)
	if m == nil {
		return "", fmt.Errorf("--sort-by %q: unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'", expr)
	}
	p := m[1]
	if !strings.HasPrefix(p, ".") {
		p = "." + p
	}
	return "{" + p + "}", nil
}

// Run queries the clusters and prints the result; with --watch it goes on until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	if o.Watch {
		return o.watch(ctx)
	}
	results := o.query(ctx)
	return o.print(results)
}
