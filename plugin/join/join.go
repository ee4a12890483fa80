// Package join implements "kubectl registry join": the seed's "copy/paste Cluster and
// secret resources" swap between two clusters, checked before anything is written.
//
// join copies the local Cluster CR of side A (--context) and its reader kubeconfig Secret
// to side B (--peer-context), and B's to A. One swap with any member of a group is
// enough for a new cluster: the controllers spread membership to the rest.
package join

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
)

const (
	joinLong = `
		Join two clusters: copy the local Cluster CR of the cluster of --context (side A) and
		its reader kubeconfig Secret to the cluster of --peer-context (side B), and B's to A.
		This is the seed's "copy/paste Cluster and secret resources" step, done once and
		checked first. A new cluster needs one join with any member of a group: the
		controllers spread membership to every other member by themselves.

		The kubeconfig flags (--kubeconfig, --context, --user, ...) select side A;
		--peer-kubeconfig and --peer-context select side B. Both clusters must run the registry
		controller ("kubectl registry serve", installed by "kubectl registry install"), which
		creates each cluster's Cluster CR and reader Secret; with --legacy, side B runs the
		seed's cluster-registry-controller instead. join tells them apart by the token of
		each side's own reader Secret: the seed's controller keeps one that states no
		expiry there, the registry controller one that expires.

		Before writing anything, join checks that both API servers answer, that the registry
		is installed on both (CRD and namespace), that they are two different clusters, that
		each has its local Cluster and a valid reader Secret, that each runs the controller
		join expects, that the address each advertises
		is not a loopback address (unless --allow-loopback), that each reader token is
		accepted by the server it names and that this server is that cluster, and that the
		copies clash with no other Cluster or Secret. Any failure writes nothing.

		The copies are server-side applied (field manager kubectl-registry) with the name,
		labels and annotations, spec, Secret type and data of the originals: no status, and
		none of kubectl's last-applied, the ownership mark of the membership sync or the
		cluster-disabled annotation. Each side gets the Secret first, then the Cluster. Running
		join again changes nothing: every object is reported unchanged.

		A cluster that left the group comes back only with join, run by an admin with the
		context of a member: when one side records the other's departure, join records on
		that side's own Cluster that it admits the other again (the annotation
		cluster-registry.k8s.cisco.com/admitted-clusters), which cancels every earlier record
		of the departure as the members read it; a side that recorded its own departure
		drops that record. Nothing the departed cluster writes by itself brings it back.

		--server and --peer-server replace the address A and B advertise to each other (the
		server of the copied reader kubeconfig and the matching kubernetesApiEndpoints entry of
		the copied Cluster), for API servers that the other side reaches at another address
		than their own controller advertises. The address is checked, and pinned on the side
		it is written to: that side's Cluster of the other carries the annotation
		cluster-registry.k8s.cisco.com/pinned-server, and its controller keeps the address
		(and the CA) when it takes renewed tokens and the other's Cluster from the other
		itself. Only an admin of that side changes it: a join run again (without the flag,
		the advertised address is pinned again). The other members reach the cluster at
		the address it advertises ("kubectl registry serve --api-server-endpoint").

		With --legacy, side B runs the seed's controller (a mixed group, docs/migrate.md),
		which cannot open the sealed credential A's controller issues it. join copies B's
		reader Secret to A, then B's Cluster with the annotation
		cluster-registry.k8s.cisco.com/legacy-peer=true: A's admin names B a legacy peer there.
		It then waits, up to --timeout, for A's controller to issue B a reader credential in
		the clear (the Secret cluster-registry-reader-for-<B's cluster ID> of A's readers
		namespace), checks it, and writes it on B as the reader Secret A's Cluster names
		there (in the registry namespace, named as A's own, type
		k8s.cisco.com/cluster-registry-secret), then A's
		Cluster: Secret first, so that the seed's controller never reconciles A's Cluster
		without it. The credential expires ("kubectl registry serve
		--legacy-reader-token-lifetime", 30 days by default): run the same join again to
		renew B's copy. When no usable credential comes within --timeout, join stops with
		the consent written on A and nothing on B, and says which Secret it waited for and
		what A's Cluster of B reports (its ReaderKeyReady condition). Without --legacy, join refuses a side that runs the seed's
		controller, and a side that still names the other, which runs the registry
		controller, a legacy peer.

		With --wait, join then waits until each side's controller reports the other's Cluster
		Ready and ClustersSynced (Ready only with --one-way), as read from the Cluster status
		on each side.`

	joinExample = `
		# Join the cluster of context east with the cluster of context west
		kubectl registry join --context east --peer-context west --wait

		# Attach a new cluster to an existing group through any one member
		kubectl registry join --context east --peer-context north --wait

		# The peer's context is in another kubeconfig file
		kubectl registry join --context east --peer-kubeconfig ~/.kube/west.yaml --peer-context west

		# Advertise the API servers at other addresses than their controllers do
		kubectl registry join --context east --peer-context west \
		  --server https://east.example.com:6443 --peer-server https://west.example.com:6443

		# The cluster of context west runs the seed's cluster-registry-controller: consent to
		# it as a legacy peer on east and give it the credential east issues it (run it again
		# to renew that credential before it expires)
		kubectl registry join --context east --peer-context west --legacy --wait

		# Show the objects that would be written on each side, and write nothing (the reader
		# Secrets' data is masked; --show-secrets prints it, e.g. to commit it to a GitOps repo)
		kubectl registry join --context east --peer-context west --dry-run=client -o yaml`
)

// Defaults of the flags.
const (
	// DefaultTimeout is the default of --timeout.
	DefaultTimeout = 2 * time.Minute
	// requestTimeout bounds every request join makes, so an API server that does not
	// answer fails the preflight in reasonable time.
	requestTimeout = 10 * time.Second
	// pollInterval is how often --wait reads the Clusters' status.
	pollInterval = time.Second
)

// Options holds the flags and the state of "kubectl registry join".
type Options struct {
	// Namespace is the registry namespace on both sides.
	Namespace string
	// PeerContext and PeerKubeconfig name side B.
	PeerContext    string
	PeerKubeconfig string
	// Server and PeerServer, when set, replace the address A and B advertise to each
	// other (normalised in Complete).
	Server     string
	PeerServer string
	// AllowLoopback accepts advertised addresses on loopback (everything on one machine).
	AllowLoopback bool
	// OneWay copies only A's Cluster and Secret to B.
	OneWay bool
	// Legacy: B runs the seed's controller. A names it a legacy peer and B gets, as A's
	// reader Secret, the credential A issues it in the clear.
	Legacy bool
	// DryRun is cmdutil.DryRunNone, cmdutil.DryRunClient or cmdutil.DryRunServer.
	DryRun cmdutil.DryRunStrategy
	// Wait waits, up to Timeout, for the controllers to report each other Ready and synced.
	Wait    bool
	Timeout time.Duration
	// PollInterval is how often --wait polls; zero means one second.
	PollInterval time.Duration
	// ShowSecrets prints the Secrets' data with -o; masked otherwise.
	ShowSecrets bool
	// Now is the clock of the admission join records; nil means time.Now.
	Now func() time.Time

	PrintFlags *genericclioptions.PrintFlags

	// Set by Complete.
	printer    printers.ResourcePrinter
	yamlOutput bool
	a, b       *side

	// Set by Run: what was written so far, as reported, and the side of the last object
	// printed as YAML.
	written   []string
	printedOn *side

	// Factory resolves side A (the root's kubeconfig flags) and builds every client,
	// including those of the reader kubeconfigs the preflight checks.
	Factory kube.Factory
	// PeerFactory returns the Factory of side B: the kubeconfig file kubeconfig (the
	// one of --peer-kubeconfig, else side A's --kubeconfig, else the default loading
	// rules when empty) without side A's other kubeconfig flags.
	PeerFactory func(kubeconfig string) kube.Factory
	genericiooptions.IOStreams
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		Namespace:   v1alpha1.DefaultNamespace,
		DryRun:      cmdutil.DryRunNone,
		Timeout:     DefaultTimeout,
		PrintFlags:  genericclioptions.NewPrintFlags("").WithTypeSetter(kube.NewScheme()),
		Factory:     f,
		PeerFactory: peerFactory,
		IOStreams:   streams,
	}
}

// peerFactory is the Factory of side B: only the kubeconfig file is taken from the
// command line, the context is --peer-context.
func peerFactory(kubeconfig string) kube.Factory {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	return kube.NewFactory(flags)
}

// NewCmdJoin returns the "join" command. f is the Factory of the
// root command's kubeconfig flags: they name side A.
func NewCmdJoin(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdJoin(NewOptions(f, streams))
}

// newCmdJoin returns the "join" command of o (tests set its clock and polls).
func newCmdJoin(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "join --context A --peer-context B [flags]",
		Short:   "Join two clusters: swap their Cluster CRs and reader Secrets",
		Long:    templates.LongDesc(joinLong),
		Example: templates.Examples(joinExample),
		Args:    cmdutil.NoArgs,
		RunE:    cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of join to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	// Shadows the root's --namespace: for join it is the registry namespace.
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace,
		"Registry namespace on both clusters: where the reader Secrets live.")
	fs.StringVar(&o.PeerContext, "peer-context", o.PeerContext,
		"Kubeconfig context of side B, the cluster to join with (default: the current context of --peer-kubeconfig).")
	fs.StringVar(&o.PeerKubeconfig, "peer-kubeconfig", o.PeerKubeconfig,
		"Kubeconfig file of side B (default: the kubeconfig of side A: --kubeconfig, else KUBECONFIG, else ~/.kube/config).")
	// Shadows the root's --server: for join it is the address side A advertises.
	fs.StringVar(&o.Server, "server", o.Server,
		"API server address of side A as side B reaches it (host, host:port or https URL); replaces the server of A's reader kubeconfig and API endpoint in the copies written on B, pinned there until the next join.")
	fs.StringVar(&o.PeerServer, "peer-server", o.PeerServer,
		"API server address of side B as side A reaches it; replaces the server of B's reader kubeconfig and API endpoint in the copies written on A, pinned there until the next join.")
	fs.BoolVar(&o.AllowLoopback, "allow-loopback", o.AllowLoopback,
		"Accept advertised API server addresses on loopback (127.0.0.1, localhost): only when every cluster and controller runs on this machine.")
	fs.BoolVar(&o.OneWay, "one-way", o.OneWay,
		"Copy only A's Cluster and Secret to B, so that B reads A but not the other way round.")
	fs.BoolVar(&o.Legacy, "legacy", o.Legacy,
		"Side B runs the seed's cluster-registry-controller: name it a legacy peer on A (annotation "+v1alpha1.LegacyPeerAnnotation+" on A's copy of B's Cluster), wait up to --timeout for A's controller to issue it a reader credential in the clear, and write that on B as A's reader Secret, then A's Cluster. Run it again to renew B's copy before it expires (serve --legacy-reader-token-lifetime).")
	cmdutil.AddDryRunFlag(cmd,
		`Must be "none", "client" or "server". With "client", only print the objects that would be written; with "server", also submit them to the API servers as dry-run requests. Nothing is written either way.`)
	fs.BoolVar(&o.Wait, "wait", o.Wait,
		"After writing, wait until each side's controller reports the other's Cluster Ready and ClustersSynced (Ready only with --one-way).")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout,
		"How long --wait waits, and --legacy for the credential A issues B.")
	fs.BoolVar(&o.ShowSecrets, "show-secrets", o.ShowSecrets,
		"With -o, print the reader Secrets' data (live tokens); masked as *** otherwise.")
	o.PrintFlags.AddFlags(cmd)
}

// Complete reads the kubeconfig of both sides and derives the options that follow other
// flags. It contacts no API server.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"--server", &o.Server}, {"--peer-server", &o.PeerServer}} {
		if *f.v == "" {
			continue
		}
		server, err := kubeconfig.NormalizeServer(*f.v)
		if err != nil {
			return cmdutil.UsageError(cmd, fmt.Errorf("%s: %w", f.name, err))
		}
		*f.v = server
	}
	var err error
	if o.DryRun, err = cmdutil.GetDryRunStrategy(cmd, cmdutil.DryRunNone, cmdutil.DryRunClient, cmdutil.DryRunServer); err != nil {
		return err
	}
	if o.PrintFlags.OutputFormat != nil && *o.PrintFlags.OutputFormat != "" {
		p, err := o.PrintFlags.ToPrinter()
		if err != nil {
			return cmdutil.UsageError(cmd, err)
		}
		o.printer = p
		o.yamlOutput = *o.PrintFlags.OutputFormat == "yaml"
	}
	if o.PeerContext == "" && o.PeerKubeconfig == "" {
		return nil // Validate reports it
	}
	// The controller-runtime clients log nothing a user needs; without a logger,
	// controller-runtime prints a warning with a stack trace after 30 seconds.
	ctrllog.SetLogger(logr.Discard())
	if o.a, err = o.sideA(cmd); err != nil {
		return err
	}
	if o.b, err = o.sideB(cmd); err != nil {
		return err
	}
	return nil
}

// Validate checks the flags. It does no I/O.
func (o *Options) Validate() error {
	if o.PeerContext == "" && o.PeerKubeconfig == "" {
		return errors.New("--peer-context is required: it names the cluster to join with (side B)")
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("--namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if o.OneWay && o.PeerServer != "" {
		return errors.New("--peer-server has no effect with --one-way: side B's address is not copied to A")
	}
	if o.Legacy && o.OneWay {
		return errors.New("--legacy cannot be used with --one-way: the consent is written on A's copy of B's Cluster, which --one-way does not write")
	}
	if o.Wait && o.DryRun != cmdutil.DryRunNone {
		return errors.New("--wait cannot be used with --dry-run: nothing is written to wait for")
	}
	if (o.Wait || o.Legacy) && o.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", o.Timeout)
	}
	return nil
}

// Run checks both sides, writes the copies and, with --wait, waits for the controllers.
func (o *Options) Run(ctx context.Context) error {
	p, err := o.preflight(ctx)
	if err != nil {
		return err
	}
	if err := o.write(ctx, p); err != nil {
		return err
	}
	if o.Legacy {
		if p, err = o.finishLegacy(ctx, p); err != nil {
			return err
		}
	}
	if !o.Wait {
		return nil
	}
	return o.wait(ctx, p.waits())
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// clientOptions are the settings of every client of join.
func (o *Options) clientOptions() kube.ClientOptions {
	return kube.ClientOptions{Verb: "join", Timeout: requestTimeout, Warnings: o.ErrOut}
}

// sideA describes side A from the root's kubeconfig flags.
func (o *Options) sideA(cmd *cobra.Command) (*side, error) {
	targets, err := o.Factory.Targets(cmd, nil)
	if err != nil {
		return nil, err
	}
	t := targets[0]
	flags := ""
	if t.Name != t.Config.Host {
		flags = "--context " + t.Name
	}
	if f := o.Factory.ExplicitFile(); f != "" {
		flags = strings.TrimSpace(flags + " --kubeconfig " + f)
	}
	return o.newSide(o.Factory, t, t.Name, flags, "--server", o.Server)
}

// sideB describes side B from --peer-kubeconfig and --peer-context.
func (o *Options) sideB(cmd *cobra.Command) (*side, error) {
	path := o.PeerKubeconfig
	if path == "" {
		path = o.Factory.ExplicitFile()
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	files := describeFiles(rules.GetLoadingPrecedence())
	peer := o.PeerFactory(path)
	raw, err := peer.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("side B: %w", err)
	}
	name := o.PeerContext
	if name == "" {
		name = raw.CurrentContext
		if name == "" {
			return nil, cmdutil.UsageError(cmd, fmt.Errorf("--peer-context is required: the kubeconfig%s has no current context", files))
		}
	}
	if _, ok := raw.Contexts[name]; !ok {
		return nil, cmdutil.UsageError(cmd, fmt.Errorf("--peer-context %q: no such context in the kubeconfig%s", name, files))
	}
	t, err := peer.Target(name)
	if err != nil {
		return nil, fmt.Errorf("side B: %w", err)
	}
	flags := "--context " + name
	if path != "" {
		flags += " --kubeconfig " + path
	}
	label := name
	if o.a != nil && label == o.a.name && o.PeerKubeconfig != "" {
		// Same context name in another kubeconfig file.
		label += " (" + o.PeerKubeconfig + ")"
	}
	return o.newSide(peer, t, label, flags, "--peer-server", o.PeerServer)
}

// describeFiles names the kubeconfig files for a message: " (a, b)".
func describeFiles(files []string) string {
	if len(files) == 0 {
		return ""
	}
	return " (" + strings.Join(files, ", ") + ")"
}
