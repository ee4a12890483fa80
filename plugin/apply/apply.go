// Package apply implements "kubectl registry apply": it server-side applies the objects
// of YAML or JSON files to the clusters of several kubeconfig contexts in parallel and
// reports, per context and object, whether each was created, configured or unchanged.
// A context that fails is reported and does not stop the others.
package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/kubectl-registry/kubectl-registry/manifests/serverside"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/serverapply"
)

const (
	applyLong = `
		Apply objects to the clusters of several kubeconfig contexts at once.

		Every object of the files given with -f (multi-document YAML or JSON; "-" reads
		standard input; a directory or URL as for kubectl, with -R for subdirectories), or of
		the kustomization of -k, is applied with server-side apply (field manager "kubectl-registry",
		taking over conflicting fields) to the cluster of every context of --contexts, in
		parallel, each context within 30 seconds. Without --contexts the current context (or
		the one of --context) is used.

		Each object is reported per context, as kubectl apply does:

		    cluster-a: resourcesyncrule.clusterregistry.k8s.cisco.com/my-rule created

		(created, configured or unchanged). A context that fails (unreachable, forbidden, an
		object the API server rejects) is still applied to the other contexts, and the other
		objects too; the command then exits with 2 and an error that names each failed
		context with the API server's message.

		--dry-run=server sends every object as a server-side dry run: the API servers
		validate it and report what would happen, and nothing is persisted.`

	applyExample = `
		# Apply a rule and a feature to three clusters
		kubectl registry apply -f rule.yaml -f feature.yaml --contexts east,west,north

		# Generate a rule and apply it to two clusters
		kubectl registry create rule my-secret --kind Secret --name my-secret --namespace-match default --dry-run=client -o yaml \
		  | kubectl registry apply -f - --contexts east,west

		# Ask the API servers to validate, persisting nothing
		kubectl registry apply -f rule.yaml --contexts east,west --dry-run=server`
)

// Options holds the flags and the state of "kubectl registry apply".
type Options struct {
	// FilenameOptions are kubectl's -f, -R and -k: files, directories or URLs to
	// apply ("-" is standard input), or a kustomization.
	resource.FilenameOptions
	// Contexts are the kubeconfig contexts to apply to; empty: the current one.
	Contexts []string
	// DryRun is cmdutil.DryRunNone or cmdutil.DryRunServer.
	DryRun cmdutil.DryRunStrategy
	// Timeout bounds the work on each context.
	Timeout time.Duration

	// Set by Complete and Run.
	cmd     *cobra.Command
	objects []*unstructured.Unstructured
	targets []kube.Target

	// Factory resolves the contexts and builds the clients.
	Factory kube.Factory
	genericiooptions.IOStreams
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		DryRun:    cmdutil.DryRunNone,
		Timeout:   serverapply.ContextTimeout,
		Factory:   f,
		IOStreams: streams,
	}
}

// NewCmdApply returns the "apply" command. f is the Factory of the
// root command's kubeconfig flags.
func NewCmdApply(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(f, streams)
	cmd := &cobra.Command{
		Use:                   "apply (-f FILENAME [-R] | -k DIR)... [--contexts A,B,...] [--dry-run=server]",
		DisableFlagsInUseLine: true,
		Short:                 "Apply objects to the clusters of several contexts (server-side apply)",
		Long:                  templates.LongDesc(applyLong),
		Example:               templates.Examples(applyExample),
		Args:                  cmdutil.NoArgs,
		RunE:                  cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of apply to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	cmdutil.AddFilenameFlags(cmd, &o.FilenameOptions, `to apply (YAML or JSON, several documents each); "-" reads standard input.`)
	fs.StringSliceVar(&o.Contexts, "contexts", o.Contexts, "Kubeconfig contexts to apply to, comma-separated; the current context (or --context) when empty.")
	cmdutil.AddDryRunFlag(cmd, `Must be "none" or "server". "server" sends every object as a server-side dry run, persisting nothing.`)
}

// Validate checks the flags. It does no I/O.
func (o *Options) Validate() error {
	errs := cmdutil.ValidateFilenames(o.FilenameOptions)
	if err := kube.ValidateContexts(o.Contexts); err != nil {
		errs = append(errs, err)
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout must be positive, got %s", o.Timeout))
	}
	return errors.Join(errs...)
}

// Complete keeps the command for the usage errors of Run. The files are read and the
// contexts resolved by Run, after Validate.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	o.cmd = cmd
	var err error
	o.DryRun, err = cmdutil.GetDryRunStrategy(cmd, cmdutil.DryRunNone, cmdutil.DryRunServer)
	return err
}

// prepare reads and decodes the files and resolves the contexts. It contacts no API
// server.
func (o *Options) prepare() error {
	objs, err := o.readFiles()
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return cmdutil.UsageErrorf(o.cmd, "no objects found in %s", strings.Join(append(o.Filenames, o.Kustomize), ", "))
	}
	o.objects = objs
	targets, err := o.Factory.Targets(o.cmd, o.Contexts)
	if err != nil {
		return err
	}
	o.targets = targets
	return nil
}

// readFiles decodes the objects of -f or -k (cmdutil.ReadObjects).
func (o *Options) readFiles() ([]*unstructured.Unstructured, error) {
	return cmdutil.ReadObjects(o.FilenameOptions, o.In)
}

// contextResult is what applying to one context did.
type contextResult struct {
	results []serverside.Result
	errs    []error
}

// Run applies every object to every target in parallel, then prints the results in the
// order of the contexts and the objects.
func (o *Options) Run(ctx context.Context) error {
	if err := o.prepare(); err != nil {
		return err
	}
	all := make([]contextResult, len(o.targets))
	var wg sync.WaitGroup
	for i, t := range o.targets {
		wg.Go(func() { all[i] = o.applyTo(ctx, t) })
	}
	wg.Wait()

	suffix := ""
	if o.DryRun == cmdutil.DryRunServer {
		suffix = " (server dry run)"
	}
	var failed []*cmdutil.ContextError
	for i, t := range o.targets {
		r := all[i]
		for _, res := range r.results {
			if _, err := fmt.Fprintf(o.Out, "%s: %s %s%s\n", t.Name, serverapply.ObjectRef(res.Object), res.Outcome, suffix); err != nil {
				return err
			}
		}
		if len(r.errs) > 0 {
			failed = append(failed, &cmdutil.ContextError{Context: t.Name, Errs: r.errs})
		}
	}
	if len(failed) > 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitCodeError,
			Err: &cmdutil.ContextsError{Doing: "applying", Total: len(o.targets), Failed: failed}}
	}
	return nil
}

// applyTo applies every object to one target, within Timeout. An object the API server
// rejects is reported and the next one applied; when the API server cannot be reached,
// the remaining objects are not tried.
func (o *Options) applyTo(ctx context.Context, t kube.Target) contextResult {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var r contextResult
	c, err := o.Factory.Client(t, kube.ClientOptions{Verb: "apply", Timeout: o.Timeout, Warnings: o.ErrOut})
	if err != nil {
		r.errs = append(r.errs, err)
		return r
	}
	for _, obj := range o.objects {
		outcome, _, err := serverapply.Object(ctx, c, obj, o.DryRun == cmdutil.DryRunServer)
		if err != nil {
			r.errs = append(r.errs, serverapply.Explain(err, obj, t))
			if !serverapply.IsAPIStatus(err) && !meta.IsNoMatchError(err) {
				break // unreachable: the other objects would fail the same way
			}
			continue
		}
		r.results = append(r.results, serverside.Result{Object: obj, Outcome: outcome})
	}
	return r
}
