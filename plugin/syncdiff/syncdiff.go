// Package syncdiff implements "kubectl registry sync-diff": the exact preview and drift
// report of the ResourceSyncRules of a group, computed with the controller's own decision
// code (planner.Gather and planner.Decide, rules.Compile), read through kubeconfig contexts.
package syncdiff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/clientgo"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

const (
	syncDiffLong = `
		Show what the ResourceSyncRules of a group would write on each cluster, or where the
		group has drifted from what they ask for.

		For every cluster diffed, sync-diff computes the desired local state of every rule (or
		of the named RULEs) exactly as that cluster's controller does, with the controller's
		own code: the cluster's rules and the built-in rule that syncs ResourceSyncRules, its
		peers (its Cluster CRs) as sources with their ClusterFeatures, matching, mutations and
		ownership marks, and the differ that decides create, update, delete or conflict. It
		then compares the result with the objects the cluster has:

		    create     the copy is missing
		    update     the copy differs (a unified diff of the live object against the desired one, without the fields the API server sets)
		    delete     the copy's origin was seen to no longer have the object
		    conflict   an object the rule may not touch is in the way (made locally, or another origin's copy)
		    failed     the controller would fail (a mutation error, a missing namespace)

		Unchanged objects are counted, and listed with -v.

		When several peers offer the same object, the copy follows the origin with the
		lowest cluster ID, or keeps following its own origin while that origin has it:
		sync-diff says which origin and why, and lists the others as losing candidates.

		Clusters are read through kubeconfig contexts and matched to the Cluster CRs by their
		cluster ID (the UID of their kube-system namespace). With --contexts, each listed
		context is diffed, and they are the peers read as sources. Without it, the cluster of
		--context (or the current context) is diffed, and its peers are read through the other
		contexts of the kubeconfig. A peer that no context reaches cannot be read: what it
		would sync is not shown, and sync-diff exits with 2 at the end.

		-f previews new or changed rules: they join (or replace, by name) every diffed
		cluster's rules before the diff, and only their effects are shown unless RULEs are
		named. They are validated by a server-side dry-run; nothing is written anywhere.

		Like kubectl diff, sync-diff exits with 0 when there are no differences, 1 when there
		are, and greater than 1 on errors (a context that cannot be read is reported, the
		others are still diffed). KUBECTL_EXTERNAL_DIFF names a program to show the diffs
		with (it gets two directories, live and desired). Secret data is masked unless
		--show-secrets.

		Rules a cluster's controller would copy from its peers (the built-in rule that syncs
		ResourceSyncRules) count as its rules, so a rule applied on one member shows what
		it writes on every member it reaches.

		--membership also diffs the membership sync: the Cluster CRs and the reader Secrets
		(in the registry namespace, --namespace) that each diffed cluster's controller
		copies from its peers, computed with the controller's own planner. Each write is
		shown with its op (create, update, replace, delete, ...) and, when it changes a live
		object, a unified diff; a copy the differ may not write is a conflict. Peers are
		read through your contexts, as for the rules, not through their reader Secrets.`

	syncDiffExample = `
		# What do the rules of the group write, or where has it drifted?
		kubectl registry sync-diff --contexts east,west,north

		# Preview a new rule before applying it
		kubectl registry sync-diff --contexts east,west,north -f configmaps-rule.yaml

		# One rule, the cluster of the current context, its peers through the other contexts
		kubectl registry sync-diff configmaps

		# The plan as JSON
		kubectl registry sync-diff --contexts east,west -o json

		# The rules and the membership: Cluster CRs and reader Secrets
		kubectl registry sync-diff --contexts east,west,north --membership`
)

// Options holds the flags and the state of "kubectl registry sync-diff".
type Options struct {
	// Contexts are the contexts to diff, which are also the peers read.
	Contexts []string
	// FilenameOptions are kubectl's -f, -R and -k: files, directories, URLs or a
	// kustomization of rules to preview.
	resource.FilenameOptions
	// RuleNames limit the output to these rules.
	RuleNames []string
	// Deleting are rules to preview as deleted: they stop running, and with deletionPolicy
	// Delete their copies are deleted.
	Deleting    []string
	ShowSecrets bool
	Verbose     bool
	// Membership adds the membership sync (Cluster CRs and reader Secrets) to the diff.
	Membership bool
	// Namespace is the registry namespace, where the reader Secrets live.
	Namespace string
	// Output is "", "yaml" or "json".
	Output string
	// MaxRules is the controllers' --max-rules: the rules past it by name do not run.
	MaxRules int

	// Set by Complete.
	contextFlag string
	diffed      []string
	others      []string
	targets     map[string]clientgo.Target
	preview     []*v1alpha1.ResourceSyncRule
	externalEnv string

	// Factory reads the kubeconfig and builds the clients.
	Factory clientgo.Factory
	scheme  *runtime.Scheme
	genericiooptions.IOStreams
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f clientgo.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{Namespace: v1alpha1.DefaultNamespace, MaxRules: planner.DefaultMaxRules, Factory: f, scheme: clientgo.NewScheme(), IOStreams: streams}
}

// NewCmdSyncDiff returns the "sync-diff" command.
func NewCmdSyncDiff(f clientgo.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(f, streams)
	cmd := &cobra.Command{
		Use:     "sync-diff [--contexts A,B,C | --context A] [-f RULE_FILE] [RULE...]",
		Short:   "Preview what the ResourceSyncRules write on each cluster, or show drift",
		Long:    templates.LongDesc(syncDiffLong),
		Example: templates.Examples(syncDiffExample),
		RunE:    cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of sync-diff to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringSliceVar(&o.Contexts, "contexts", o.Contexts,
		"Kubeconfig contexts of the clusters to diff, comma-separated; they are also the peers read as sources. Without it, the cluster of --context is diffed.")
	cmdutil.AddFilenameFlags(cmd, &o.FilenameOptions, `of ResourceSyncRules to preview ("-" for standard input); repeatable. Nothing is written.`)
	fs.StringSliceVar(&o.Deleting, "deleting", o.Deleting,
		"Preview the deletion of these rules (comma-separated or repeated): they stop, and with deletionPolicy Delete their copies are deleted. Nothing is written.")
	fs.BoolVar(&o.ShowSecrets, "show-secrets", o.ShowSecrets, "Show the data of Secrets instead of masking it.")
	fs.BoolVarP(&o.Verbose, "verbose", "v", o.Verbose, "List unchanged objects too.")
	fs.StringVarP(&o.Output, "output", "o", o.Output, "Output format: yaml or json, a machine-readable plan. Default: a human-readable diff.")
	fs.IntVar(&o.MaxRules, "max-rules", o.MaxRules,
		"The controllers' --max-rules: each runs at most this many ResourceSyncRules, the first by name, and the diff plans only those.")
	fs.BoolVar(&o.Membership, "membership", o.Membership,
		"Also diff the membership sync: the Cluster CRs and reader Secrets each controller copies from its peers.")
	// Shadows the root's --namespace: for sync-diff it is the registry namespace.
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace,
		"Registry namespace: where the reader Secrets live (with --membership).")
}

// Complete reads the kubeconfig and the rule files.
func (o *Options) Complete(cmd *cobra.Command, args []string) error {
	o.RuleNames = args
	o.externalEnv = os.Getenv(ExternalDiffEnv)
	if f := cmd.Flag("context"); f != nil {
		o.contextFlag = f.Value.String()
	}
	if len(o.Filenames) > 0 || o.Kustomize != "" {
		objs, err := cmdutil.ReadObjects(o.FilenameOptions, o.In)
		if err != nil {
			return cmdutil.UsageError(cmd, err)
		}
		for _, u := range objs {
			r, err := toRule(u)
			if err != nil {
				return cmdutil.UsageError(cmd, fmt.Errorf("-f: %w", err))
			}
			o.preview = append(o.preview, r)
		}
	}
	if len(o.Contexts) > 0 && o.contextFlag != "" {
		return nil // Validate reports it
	}
	raw, err := o.Factory.RawConfig()
	if err != nil {
		return err
	}
	if len(o.Contexts) > 0 {
		o.diffed = o.Contexts
	} else {
		name := o.contextFlag
		if name == "" {
			name = raw.CurrentContext
		}
		if name == "" {
			return cmdutil.UsageErrorf(cmd, "no context: pass --contexts or --context, or set a current context")
		}
		o.diffed = []string{name}
		for n := range raw.Contexts {
			if n != name {
				o.others = append(o.others, n)
			}
		}
		sort.Strings(o.others)
	}
	o.targets = map[string]clientgo.Target{}
	for _, n := range append(append([]string(nil), o.diffed...), o.others...) {
		if _, ok := raw.Contexts[n]; !ok {
			return cmdutil.UsageErrorf(cmd, "context %q: no such context in the kubeconfig", n)
		}
		t, err := o.Factory.Target(n)
		if err != nil {
			if slices.Contains(o.diffed, n) {
				return fmt.Errorf("context %s: %w", n, err)
			}
			continue // another context, maybe of no cluster of the group
		}
		o.targets[n] = t
	}
	return nil
}

// toRule returns the ResourceSyncRule an object of -f is, checked as the controller
// compiles it.
func toRule(u *unstructured.Unstructured) (*v1alpha1.ResourceSyncRule, error) {
	if u.GroupVersionKind() != v1alpha1.GroupVersion.WithKind("ResourceSyncRule") {
		return nil, fmt.Errorf("%s %q is not a ResourceSyncRule of %s", u.GetKind(), u.GetName(), v1alpha1.GroupVersion)
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	var r v1alpha1.ResourceSyncRule
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		return nil, fmt.Errorf("ResourceSyncRule %q: %w", u.GetName(), err)
	}
	if _, err := planner.CompileRule(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate checks the flags. It does no I/O.
func (o *Options) Validate() error {
	if len(o.Filenames) > 0 || o.Kustomize != "" {
		if errs := cmdutil.ValidateFilenames(o.FilenameOptions); len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	if len(o.Contexts) > 0 && o.contextFlag != "" {
		return errors.New("--contexts and --context cannot be used together: --contexts lists every cluster to diff")
	}
	if err := clientgo.ValidateContexts(o.Contexts); err != nil {
		return err
	}
	if o.MaxRules < 1 {
		return fmt.Errorf("--max-rules must be at least 1, got %d", o.MaxRules)
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("--namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if o.Output != "" && o.Output != "yaml" && o.Output != "json" {
		return fmt.Errorf("--output must be yaml or json, got %q", o.Output)
	}
	for _, d := range o.Deleting {
		if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 {
			return fmt.Errorf("--deleting %q: not a rule name: %s", d, strings.Join(errs, "; "))
		}
	}
	names := map[string]bool{}
	for _, r := range o.preview {
		if names[r.Name] {
			return fmt.Errorf("-f: the ResourceSyncRule %q is given twice", r.Name)
		}
		names[r.Name] = true
	}
	return nil
}

// Run reads the clusters, computes the plans and prints them.
func (o *Options) Run(ctx context.Context) error {
	rep := &reporter{errOut: o.ErrOut, seen: map[string]bool{}}
	views := o.readViews(ctx)
	diffed, byID, unreadable := o.sortViews(views, rep)
	if err := o.dryRunPreview(ctx, diffed); err != nil {
		rep.errorf("%v", err)
		return &cmdutil.ExitError{Code: cmdutil.ExitCodeError}
	}
	results, members := o.plan(ctx, diffed, byID, unreadable)
	allItems, errs, differences := o.collect(diffed, results, members, rep)
	for _, v := range views[:len(o.diffed)] {
		if v.Err != nil {
			errs = append(errs, v.Err.Error())
		}
	}
	if err := o.print(allItems, errs, rep); err != nil {
		return err
	}
	switch {
	case rep.failed:
		return &cmdutil.ExitError{Code: cmdutil.ExitCodeError}
	case differences:
		return &cmdutil.ExitError{Code: cmdutil.ExitCodeDifferences}
	}
	return nil
}

// reporter writes the errors and notes of a run to stderr, each message once, and
// remembers whether any error was written (exit code 2).
type reporter struct {
	errOut io.Writer
	failed bool
	seen   map[string]bool
}

func (r *reporter) errorf(format string, args ...any) {
	r.failed = true
	fmt.Fprintf(r.errOut, "error: "+format+"\n", args...)
}

// once reports whether msg is new, and marks it seen.
func (r *reporter) once(msg string) bool {
	if r.seen[msg] {
		return false
	}
	r.seen[msg] = true
	return true
}

// readViews reads every context, the diffed ones first, in parallel.
func (o *Options) readViews(ctx context.Context) []*view {
	all := append(append([]string(nil), o.diffed...), o.others...)
	views := make([]*view, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		t, ok := o.targets[n]
		if !ok {
			views[i] = &view{Context: n, Err: fmt.Errorf("context %s has no usable configuration", n)}
			continue
		}
		wg.Go(func() {
			api, err := o.clients(t)
			if err != nil {
				views[i] = &view{Context: n, Err: fmt.Errorf("context %s: %w", n, err)}
				return
			}
			views[i] = connect(ctx, n, api)
		})
	}
	wg.Wait()
	return views
}

// sortViews returns the views to diff (read, installed, each cluster once), every read
// cluster by ID (the peers), and the contexts that could not be read. A diffed context
// that could not be read, or where the registry is not installed, is an error.
func (o *Options) sortViews(views []*view, rep *reporter) (diffed []*view, byID map[types.UID]*view, unreadable []string) {
	byID = map[types.UID]*view{}
	for i, v := range views {
		isDiffed := i < len(o.diffed)
		if v.Err != nil {
			if isDiffed {
				rep.errorf("%v", v.Err)
			}
			unreadable = append(unreadable, v.Context)
			continue
		}
		if prev, ok := byID[v.ID]; ok {
			if isDiffed {
				fmt.Fprintf(o.ErrOut, "warning: context %s is the cluster of context %s: diffed once\n", v.Context, prev.Context)
			}
			continue
		}
		byID[v.ID] = v
		if !isDiffed {
			continue
		}
		if !v.Installed {
			rep.errorf("context %s: the registry is not installed (its CRDs are not served): run kubectl registry install", v.Context)
			continue
		}
		diffed = append(diffed, v)
	}
	return diffed, byID, unreadable
}

// plan plans every diffed cluster in parallel: its rules and, with --membership, first
// its membership sync.
func (o *Options) plan(ctx context.Context, diffed []*view, byID map[types.UID]*view, unreadable []string) (results, members []result) {
	results = make([]result, len(diffed))
	members = make([]result, len(diffed))
	var wg sync.WaitGroup
	for i, v := range diffed {
		wg.Go(func() {
			p := &differ{local: v, byID: byID, preview: o.preview, unreadable: unreadable, namespace: o.Namespace, deleting: o.Deleting, maxRules: o.MaxRules}
			if o.Membership {
				// First: the rules are planned on the Clusters the membership sync leaves.
				members[i] = p.membership(ctx, o.Namespace, o.scheme)
			}
			results[i] = p.plan(ctx)
		})
	}
	wg.Wait()
	return results, members
}

// ruleFilter returns the rules the output is limited to: the named ones, else those
// previewed by -f or --deleting; none limits nothing.
func (o *Options) ruleFilter() []string {
	if len(o.RuleNames) > 0 {
		return o.RuleNames
	}
	var filter []string
	for _, r := range o.preview {
		filter = append(filter, r.Name)
	}
	return append(filter, o.Deleting...)
}

// collect reports the plans' notes and warnings, prints each cluster's items as text
// (without -o), and returns every item shown, the errors and whether any item is a
// difference.
func (o *Options) collect(diffed []*view, results, members []result, rep *reporter) (allItems []Item, errs []string, differences bool) {
	filter := o.ruleFilter()
	for i, v := range diffed {
		for _, n := range results[i].Notes {
			if rep.once(n) {
				fmt.Fprintf(o.ErrOut, "note: %s\n", n)
			}
		}
		for _, w := range append(results[i].Warnings, members[i].Warnings...) {
			if rep.once(w) {
				rep.errorf("%s", w)
				errs = append(errs, w)
			}
		}
		var items []Item
		for _, it := range results[i].Items {
			if len(filter) == 0 || slices.Contains(filter, it.Rule) {
				items = append(items, it)
			}
		}
		items = append(items, members[i].Items...)
		for _, it := range items {
			differences = differences || it.difference()
		}
		if o.Output == "" {
			printText(o.Out, v, items, o.Verbose, o.ShowSecrets, o.externalEnv != "")
		}
		allItems = append(allItems, items...)
	}
	return allItems, errs, differences
}

// print writes the plan of -o, or runs KUBECTL_EXTERNAL_DIFF; the text was printed by
// collect.
func (o *Options) print(allItems []Item, errs []string, rep *reporter) error {
	switch {
	case o.Output != "":
		var keep []Item
		for _, it := range allItems {
			if it.difference() || o.Verbose {
				keep = append(keep, it)
			}
		}
		return printPlan(o.Out, o.Output, keep, errs, o.ShowSecrets)
	case o.externalEnv != "":
		if err := externalDiff(allItems, o.ShowSecrets, o.Out, o.ErrOut); err != nil {
			rep.errorf("%v", err)
		}
	}
	return nil
}

// clients returns the clients of t: each request within requestTimeout, or within
// --request-timeout when that is given.
func (o *Options) clients(t clientgo.Target) (*apiClients, error) {
	timeout := requestTimeout
	if t.Config.Timeout != 0 {
		timeout = t.Config.Timeout
	}
	return newClients(o.Factory, t, clientgo.ClientOptions{Verb: "sync-diff", Timeout: timeout, Warnings: o.ErrOut})
}

// dryRunPreview submits the previewed rules to every diffed cluster as a server-side
// dry-run apply, so that what the API server would reject is reported.
func (o *Options) dryRunPreview(ctx context.Context, diffed []*view) error {
	if len(o.preview) == 0 {
		return nil
	}
	var errs []error
	for _, v := range diffed {
		api, err := o.clients(o.targets[v.Context])
		if err != nil {
			return err
		}
		for _, r := range o.preview {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
			if err != nil {
				return err
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ResourceSyncRule"))
			unstructured.RemoveNestedField(u.Object, "status")
			unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
			if err := api.dryRunApply(ctx, u); err != nil {
				errs = append(errs, fmt.Errorf("ResourceSyncRule %s is rejected by cluster %s (context %s): %w", r.Name, v.Name(), v.Context, err))
			}
		}
	}
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return errors.New(strings.Join(msgs, "\n"))
	}
	return nil
}
