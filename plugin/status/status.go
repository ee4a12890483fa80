// Package status implements "kubectl registry status": the group as the controller of one
// cluster sees it, read from the status of its Cluster and ResourceSyncRule CRs (nothing
// is probed from this machine), or several clusters' views side by side.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

const (
	statusLong = `
		Show the group of clusters as the registry controller of one cluster sees it: the
		Cluster CRs and ResourceSyncRules of the cluster of --context, with the status its
		controller wrote. Nothing is computed from this machine: a peer shows Ready when that
		controller reached it, whatever this machine can reach.

		The first table lists the clusters, sorted by name: NAME, ID (spec.clusterID), TYPE
		(Local or Peer), STATE, READY and SYNCED (the Ready and ClustersSynced conditions),
		VERSION, PROVIDER, LAST HEARTBEAT (how long ago the controller last confirmed the Ready
		condition) and MESSAGE (status.message, cut to 60 characters). The second lists the
		ResourceSyncRules: NAME, KIND (Kind.version.group), READY, SOURCES (selected peers
		syncing / selected peers), SYNCED (objects), CONFLICTS and MESSAGE (the Ready
		condition's message when False, else the Conflict's or the Degraded's when True).

		-o wide adds to the clusters' table the key and credential states, the reasons of
		each Cluster's conditions: KEY (ReaderKeyReady: this cluster's key pair on the local
		Cluster, the key a peer advertises on a peer's), CREDENTIAL (ReaderCredentialReady:
		IssuedCredential, or BootstrapCredential when the peer is read with its shared reader
		token only) and RELAYS (RelaysAgree, on the local Cluster: ConflictingRelays when the
		members relay a cluster differently).

		-o json|yaml prints the same as a document {context, clusters: [...], rules: [...]}
		with full messages and timestamps instead of ages (and the three conditions as
		readerKey, readerCredential and relays).

		--events adds the last warning events of the registry's objects (Clusters,
		ClusterFeatures, ResourceSyncRules) of each cluster read, newest first, at most
		--max-events (5) per cluster; the document gets "events: [...]".

		--watch (-w) keeps running and prints the view again whenever a Cluster or a
		ResourceSyncRule (or, with --events, a warning event) of a cluster read changes,
		like "kubectl get -w"; on a terminal each view replaces the last one. Errors are
		printed on stderr when they change and the watch goes on; Ctrl-C ends it.

		--contexts a,b,c reads several contexts in parallel (10 seconds each) and prints, per
		cluster name, the STATE each context reports for it ("-" when the context does not
		know the cluster, "?" when the context could not be read), and DISAGREE: "yes" when
		the contexts that could be read do not all know the cluster or report different
		states. A context that cannot be read is reported on stderr and the command exits
		with 2 after printing. With -o json|yaml it prints {contexts: [...]}, one view per
		context, with "error" set for those that failed.`

	statusExample = `
		# The group as the controller of context east sees it
		kubectl registry status --context east

		# The same, as JSON
		kubectl registry status --context east -o json

		# Compare what three members think of the group
		kubectl registry status --contexts east,west,north

		# Follow the group as it changes, with the last warnings of each cluster
		kubectl registry status --contexts east,west -w --events`
)

// ContextTimeout bounds the reading of one context.
const ContextTimeout = 10 * time.Second

func outputFormats() []string { return []string{"json", "yaml", "wide"} }

// document reports whether the output is a JSON or YAML document (not a table).
func (o *Options) document() bool { return o.Output == "json" || o.Output == "yaml" }

// Options holds the flags and the state of "kubectl registry status".
type Options struct {
	// Output is "" or "wide" (tables), "json" or "yaml".
	Output string
	// Contexts, when set, are the contexts to compare (--contexts).
	Contexts []string
	// Timeout bounds the reading of each context.
	Timeout time.Duration
	// Now returns the time ages are computed at; time.Now when nil.
	Now func() time.Time
	// Watch prints the view again on every change until the context ends (--watch).
	Watch bool
	// Events adds the last warning events of the registry's objects (--events), at most
	// MaxEvents per cluster (--max-events).
	Events    bool
	MaxEvents int

	// Set by Complete: one target per context read.
	targets []target

	// Factory resolves the contexts and builds the clients.
	Factory kube.Factory
	genericiooptions.IOStreams
}

// target is one context to read.
type target struct {
	kube.Target
	flags string // "--context a --kubeconfig f", for hints
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		Timeout:   ContextTimeout,
		MaxEvents: DefaultMaxEvents,
		Factory:   f,
		IOStreams: streams,
	}
}

// NewCmdStatus returns the "status" command. f is the Factory of the
// root command's kubeconfig flags.
func NewCmdStatus(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdStatus(NewOptions(f, streams))
}

// newCmdStatus returns the "status" command of o (tests set its clock).
func newCmdStatus(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "status [--context C | --contexts A,B,...] [-w] [--events] [-o json|yaml|wide]",
		Short:   "Show the group of clusters and the sync rules as a cluster's controller sees them",
		Long:    templates.LongDesc(statusLong),
		Example: templates.Examples(statusExample),
		Args:    cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return cmdutil.UsageError(cmd, err)
			}
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of status to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&o.Output, "output", "o", o.Output, "Output format: one of ("+strings.Join(outputFormats(), ", ")+"). Tables when empty; wide adds each cluster's key and credential states (the reasons of its ReaderKeyReady, ReaderCredentialReady and RelaysAgree conditions).")
	fs.StringSliceVar(&o.Contexts, "contexts", o.Contexts, "Kubeconfig contexts to compare, comma-separated: each one's view of the group side by side.")
	fs.BoolVarP(&o.Watch, "watch", "w", o.Watch, "After printing, watch the Clusters and ResourceSyncRules and print again on every change (Ctrl-C ends).")
	fs.BoolVar(&o.Events, "events", o.Events, "Also show the last warning events of the registry's objects of each cluster, newest first.")
	fs.IntVar(&o.MaxEvents, "max-events", o.MaxEvents, "How many warning events --events shows per cluster.")
}

// Validate checks the flags. It does no I/O.
func (o *Options) Validate() error {
	if o.Output != "" && !slices.Contains(outputFormats(), o.Output) {
		return fmt.Errorf("--output must be one of (%s), got %q", strings.Join(outputFormats(), ", "), o.Output)
	}
	if err := kube.ValidateContexts(o.Contexts); err != nil {
		return err
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("timeout must be positive, got %s", o.Timeout)
	}
	if o.MaxEvents <= 0 {
		return fmt.Errorf("--max-events must be positive, got %d", o.MaxEvents)
	}
	return nil
}

// Complete resolves the contexts to read from the kubeconfig. It contacts no API server.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	// The controller-runtime clients log nothing a user needs; without a logger,
	// controller-runtime prints a warning with a stack trace after 30 seconds.
	ctrllog.SetLogger(logr.Discard())
	if o.Now == nil {
		o.Now = time.Now
	}
	targets, err := o.Factory.Targets(cmd, o.Contexts)
	if err != nil {
		return err
	}
	explicit := o.Factory.ExplicitFile()
	o.targets = make([]target, len(targets))
	for i, t := range targets {
		name := t.Name
		if name == t.Config.Host {
			name = "" // no context: the server of the kubeconfig flags
		}
		o.targets[i] = target{Target: t, flags: hintFlags(name, explicit)}
	}
	return nil
}

// Run reads the targets and prints; with --watch it goes on until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	if o.Watch {
		return o.watch(ctx)
	}
	return o.runOnce(ctx, o.Out, o.ErrOut)
}

// runOnce reads the targets once and prints to out, and the errors of the contexts that
// could not be read to errOut.
func (o *Options) runOnce(ctx context.Context, out, errOut io.Writer) error {
	if len(o.Contexts) == 0 {
		v, err := o.read(ctx, o.targets[0])
		if err != nil {
			return err
		}
		if o.document() {
			return printDocument(out, o.Output, v)
		}
		if err := printView(out, v, o.Now(), o.Output == "wide"); err != nil {
			return err
		}
		if o.Events {
			fmt.Fprintln(out)
			return printEvents(out, "", v.Events, o.Now())
		}
		return nil
	}
	return o.runMulti(ctx, out, errOut)
}

// runMulti reads every context in parallel and prints them side by side.
func (o *Options) runMulti(ctx context.Context, out, errOut io.Writer) error {
	views := make([]View, len(o.targets))
	errs := make([]error, len(o.targets))
	var wg sync.WaitGroup
	for i, t := range o.targets {
		wg.Go(func() { views[i], errs[i] = o.read(ctx, t) })
	}
	wg.Wait()

	failed := make([]bool, len(o.targets))
	var names []string
	for i, err := range errs {
		if err != nil {
			failed[i] = true
			names = append(names, o.targets[i].Name)
			fmt.Fprintf(errOut, "error: %v\n", err)
		}
	}
	var perr error
	if o.document() {
		doc := MultiView{Contexts: make([]ContextView, len(o.targets))}
		for i, t := range o.targets {
			doc.Contexts[i] = ContextView{View: views[i]}
			if errs[i] != nil {
				doc.Contexts[i] = ContextView{View: View{Context: t.Name, Clusters: []ClusterInfo{}, Rules: []RuleInfo{}}, Error: errs[i].Error()}
			}
		}
		perr = printDocument(out, o.Output, doc)
	} else if len(names) < len(o.targets) {
		// A table of no context's view would be an empty header: print nothing when
		// every context failed, like any other error.
		perr = printCompare(out, o.Contexts, compare(views, failed))
		for i, t := range o.targets {
			if perr != nil || !o.Events || failed[i] {
				continue
			}
			fmt.Fprintln(out)
			perr = printEvents(out, "on context "+t.Name, views[i].Events, o.Now())
		}
	}
	if perr != nil {
		return perr
	}
	if len(names) > 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitCodeError,
			Err: fmt.Errorf("could not read %d of %d contexts: %s", len(names), len(o.targets), strings.Join(names, ", "))}
	}
	return nil
}

// read lists the Clusters and ResourceSyncRules of one context, within Timeout, or
// within --request-timeout when that is given.
func (o *Options) read(ctx context.Context, t target) (View, error) {
	// --request-timeout, when given, replaces the default bound, longer or shorter.
	timeout := o.Timeout
	if t.Config.Timeout != 0 {
		timeout = t.Config.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := o.Factory.Client(t.Target, kube.ClientOptions{Verb: "status", Timeout: timeout, Warnings: o.ErrOut})
	if err != nil {
		return View{}, o.readError(t, "Clusters", err)
	}
	var clusters v1alpha1.ClusterList
	if err := cl.List(ctx, &clusters); err != nil {
		return View{}, o.readError(t, "Clusters", err)
	}
	var rules v1alpha1.ResourceSyncRuleList
	if err := cl.List(ctx, &rules); err != nil {
		return View{}, o.readError(t, "ResourceSyncRules", err)
	}
	v := newView(t.Name, clusters.Items, rules.Items, readerServers(ctx, cl, clusters.Items))
	if o.Events {
		events, err := readEvents(ctx, cl, o.MaxEvents)
		if err != nil {
			return View{}, o.readError(t, "Events", err)
		}
		v.Events = events
	}
	return v, nil
}

// readError explains why a context could not be read.
func (o *Options) readError(t target, what string, err error) error {
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return fmt.Errorf("the registry is not installed on context %s (%s): the CRDs of %s are missing; run: kubectl registry install %s",
			t.Name, t.Config.Host, v1alpha1.GroupVersion.Group, t.flags)
	}
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return fmt.Errorf("context %s: the API server at %s does not let you list %s: %w", t.Name, t.Config.Host, what, err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return fmt.Errorf("context %s: listing %s at %s: %w", t.Name, what, t.Config.Host, err)
	}
	return fmt.Errorf("cannot reach the API server of context %s at %s: %w", t.Name, t.Config.Host, err)
}

// printDocument prints doc as JSON or YAML.
func printDocument(out io.Writer, format string, doc any) error {
	var b []byte
	var err error
	switch format {
	case "json":
		b, err = json.MarshalIndent(doc, "", "  ")
		b = append(b, '\n')
	case "yaml":
		b, err = yaml.Marshal(doc)
	}
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

func hintFlags(contextName, explicit string) string {
	var parts []string
	if contextName != "" {
		parts = append(parts, "--context "+contextName)
	}
	if explicit != "" {
		parts = append(parts, "--kubeconfig "+explicit)
	}
	return strings.Join(parts, " ")
}

// readerServers returns, for each peer Cluster whose reader Secret this user may read,
// the API server its reader kubeconfig names: where this cluster reaches the peer.
func readerServers(ctx context.Context, cl client.Client, clusters []v1alpha1.Cluster) map[string]string {
	out := map[string]string{}
	for _, c := range clusters {
		ref := c.Spec.AuthInfo.SecretRef
		if ref.Name == "" {
			continue
		}
		ns := ref.Namespace
		if ns == "" {
			ns = v1alpha1.DefaultNamespace
		}
		var s corev1.Secret
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &s); err != nil {
			continue // not readable by this user: the column stays empty
		}
		if r, ok := kubeconfig.Read(s.Data[v1alpha1.KubeconfigKey]); ok {
			out[c.Name] = r.Server
		}
	}
	return out
}
