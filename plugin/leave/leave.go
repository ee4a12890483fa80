// Package leave implements "kubectl registry leave": it removes a cluster from the group,
// from the context of any member (or of the leaving cluster itself).
//
// The group has no hub, and every member copies membership from the others, so deleting
// a Cluster CR somewhere is undone by the next member that still has it. leave records
// the departure instead: it adds the leaving cluster to the confirmed-departures
// annotation of the own Cluster CR of the member it talks to. The departure takes
// effect when the leaving cluster recorded it itself, or when a strict majority of the
// members record it (see reconciler/planner/members Decide); every controller then
// deletes its copies of the departed cluster's Cluster CR and reader Secret and does not
// learn them again, and the departed cluster deletes its copies of every other member.
// "kubectl registry join" on a member brings a cluster that left back.
package leave

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

const (
	leaveLong = `
		Remove a cluster from the group, from the context of any member, or of the leaving
		cluster itself.

		leave records the departure on the own Cluster CR of the cluster of --context (the
		annotation cluster-registry.k8s.cisco.com/confirmed-departures). No single member
		decides it: the departure takes effect when the leaving cluster recorded it itself
		(leave run with its own context), or when a strict majority of the members (the
		leaving cluster counted) record it, each on its own Cluster as the other members
		read it from that member's API server. Until then leave says how many more members
		must record it, and --confirm, run with the context of another member, adds that
		member's record. In a group of two, only the leaving cluster itself can remove
		it.

		Once in force, every member deletes its Cluster CR of the departed cluster and its
		copy of that cluster's reader Secret, revokes its access (new requests with its tokens
		are rejected within seconds; a watch it opened before keeps streaming until the API
		server ends it, 30 to 60 minutes by default, see docs/guarantees.md), stops reading
		it, and does not learn it again from the others; the departed cluster deletes its copies of every other member's
		Cluster CR and reader Secret. Nothing else is deleted: objects synced to or from the
		departed cluster are kept (they keep their ownership mark and are no longer updated),
		and the registry stays installed on it ("kubectl registry uninstall" removes it).

		The departed cluster must be Ready in the view of --context, so that it can be told to
		forget the group. --force records the departure of a cluster that cannot be reached (a
		dead, stopped or unreachable cluster); it forgets the group when its controller runs
		again, from the departure notices the members keep for it (readable with a token they
		issued it before, for at least half of --reader-token-lifetime after the removal,
		12 hours by default), once a majority of the members record the departure. leave talks only to the API server of --context and, with
		--wait, reads the members with their reader kubeconfigs; it never waits on a member
		that is not Ready.

		A cluster that left comes back only with "kubectl registry join" run by an admin with
		a member's context (the join records the admission on that member's own Cluster);
		nothing the departed cluster writes on its own Cluster brings it back, and recreating
		its Cluster CR by hand is not enough, the members would delete it again.

		--wait waits, up to --timeout, until the controllers have done it, as read from the
		clusters themselves: no Ready member holds a Cluster CR of the departed cluster any
		more, and the departed cluster (if it is Ready) holds none of the others'. A cluster
		leaving by itself reads the members with the credentials they issued to it, which
		they revoke once they have dropped it: a member that accepted its credential when
		leave started and rejects it later is done.`

	leaveExample = `
		# Remove the cluster "west" from the group, from the context of any member
		kubectl registry leave west --context east --wait

		# Leave the group with the cluster of the current context
		kubectl registry leave

		# Remove a cluster that is gone for good: start on one member...
		kubectl registry leave west --context east --force
		# ...and confirm on others until a majority of the members record it
		kubectl registry leave west --context north --confirm

		# Show the Cluster CR leave would write, and write nothing
		kubectl registry leave west --context east --dry-run=client -o yaml`
)

const (
	// DefaultTimeout is the default of --timeout.
	DefaultTimeout = 2 * time.Minute
	// requestTimeout bounds every request leave makes.
	requestTimeout = 10 * time.Second
	// pollInterval is how often --wait looks.
	pollInterval = time.Second
)

const clusterResource = "cluster.clusterregistry.k8s.cisco.com"

// Options holds the flags and the state of "kubectl registry leave".
type Options struct {
	// Name is the Cluster CR (as named on --context) of the leaving cluster; empty for
	// the cluster of --context itself.
	Name string
	// Namespace is the registry namespace.
	Namespace string
	// Force records the departure of a cluster that is not Ready.
	Force bool
	// Confirm adds this member's record to a departure another member recorded.
	Confirm bool
	// DryRun is cmdutil.DryRunNone, cmdutil.DryRunClient or cmdutil.DryRunServer.
	DryRun cmdutil.DryRunStrategy
	// Wait waits, up to Timeout, until the controllers have carried the departure out.
	Wait    bool
	Timeout time.Duration
	// PollInterval is how often --wait polls; zero means one second.
	PollInterval time.Duration
	// Now is the clock of the departure time; nil means time.Now.
	Now func() time.Time

	PrintFlags *genericclioptions.PrintFlags

	// Factory resolves the context and builds every client, including those of the
	// reader kubeconfigs --wait reads the members with.
	Factory kube.Factory

	// Set by Complete.
	printer printers.ResourcePrinter
	// member is the cluster of --context.
	member kube.Target
	genericiooptions.IOStreams
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		Namespace:  v1alpha1.DefaultNamespace,
		DryRun:     cmdutil.DryRunNone,
		Timeout:    DefaultTimeout,
		PrintFlags: genericclioptions.NewPrintFlags("left the group").WithTypeSetter(kube.NewScheme()),
		Factory:    f,
		IOStreams:  streams,
	}
}

// NewCmdLeave returns the "leave" command. f is the Factory of the
// root command's kubeconfig flags: they name the member leave talks to.
func NewCmdLeave(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdLeave(NewOptions(f, streams))
}

// newCmdLeave returns the "leave" command of o (tests set its clock and polls).
func newCmdLeave(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "leave [CLUSTER] [--context MEMBER] [--force] [--wait]",
		Short:   "Remove a cluster from the group (keeps synced objects)",
		Long:    templates.LongDesc(leaveLong),
		Example: templates.Examples(leaveExample),
		Args:    cmdutil.UsageErrorArgs(cobra.MaximumNArgs(1)),
		RunE:    cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of leave to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	// Shadows the root's --namespace: for leave it is the registry namespace.
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace,
		"Registry namespace: where the reader Secrets live.")
	fs.BoolVar(&o.Force, "force", o.Force,
		"Record the departure even when the cluster is not Ready (dead or unreachable): it forgets the group when its controller next reads a majority of the members.")
	fs.BoolVar(&o.Confirm, "confirm", o.Confirm,
		"Add the record of the member of --context to a departure another member recorded (the cluster need not be Ready). The departure takes effect once a strict majority of the members record it, or the cluster records it itself.")
	cmdutil.AddDryRunFlag(cmd,
		`Must be "none", "client" or "server". With "client", only print what would be written; with "server", also submit it as a dry-run request. Nothing is written either way.`)
	fs.BoolVar(&o.Wait, "wait", o.Wait,
		"Wait until the Ready members have dropped the cluster and it has dropped them (progress on stderr).")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits.")
	o.PrintFlags.AddFlags(cmd)
}

// Complete takes the argument, derives the options that follow other flags and resolves
// the context. It contacts no API server.
func (o *Options) Complete(cmd *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Name = args[0]
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
	}
	targets, err := o.Factory.Targets(cmd, nil)
	if err != nil {
		return err
	}
	o.member = targets[0]
	if o.Now == nil {
		o.Now = time.Now
	}
	// controller-runtime's clients warn with a stack trace when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	return nil
}

// Validate checks the flags. It does no I/O.
func (o *Options) Validate() error {
	var errs []error
	if o.Name != "" {
		if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("cluster name %q: %s", o.Name, strings.Join(msgs, "; ")))
		}
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
	}
	if o.Wait && o.DryRun != cmdutil.DryRunNone {
		errs = append(errs, errors.New("--wait cannot be used with --dry-run: nothing is written to wait for"))
	}
	if o.Confirm && o.Name == "" {
		errs = append(errs, errors.New("--confirm needs the CLUSTER whose departure it confirms (a cluster leaving by itself needs no confirmation)"))
	}
	if o.Wait && o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout must be positive, got %s", o.Timeout))
	}
	return errors.Join(errs...)
}

// member is what the verb knows of the cluster of --context.
type member = kube.Member

// Run records the departure and, with --wait, waits for the controllers.
func (o *Options) Run(ctx context.Context) error {
	m, err := o.connect(ctx)
	if err != nil {
		return err
	}
	target, self, err := o.target(m)
	if err != nil {
		return err
	}
	x := target.Spec.ClusterID
	if o.Confirm && !self {
		if others := recordedBy(m, x); len(others) == 0 {
			fmt.Fprintf(o.ErrOut, "warning: no other member's record of the departure of cluster %s is on context %s yet (the copies of the members' Clusters carry their records once synced): recording it anyway\n", target.Name, m.Name)
		}
	}
	if !self && !o.Force && !o.Confirm {
		if err := notReady(target); err != nil {
			return fmt.Errorf("cluster %s is not Ready in the view of context %s (%w), so it cannot be told to forget the group now. Re-run with --force to record its departure anyway: it takes effect once a majority of the members record it (kubectl registry leave %s --confirm with the context of each other member), and it forgets the group when its controller next reads them",
				target.Name, m.Name, err, target.Name)
		}
	}

	// The clusters --wait reads, chosen before anything changes: the reader Secrets of the
	// departed cluster are deleted by the controllers.
	var watched []watchTarget
	if o.Wait {
		watched = o.watchTargets(ctx, m, target, self)
	}

	decided := members.Decided(m.Own)
	mine, _, _ := members.Records(m.Own)
	switch _, left := decided[x]; {
	case left:
		fmt.Fprintf(o.ErrOut, "cluster %s (clusterID %s) already left the group at %s (recorded on %s/%s)\n",
			target.Name, x, decided[x].UTC().Format(time.RFC3339), clusterResource, m.Own.Name)
	case mine[x].IsZero() || o.printer != nil:
		updated := m.Own
		if mine[x].IsZero() {
			if updated, err = o.record(ctx, m, x); err != nil {
				return err
			}
		}
		if err := o.print(updated, target, self, m); err != nil {
			return err
		}
	default:
		fmt.Fprintf(o.ErrOut, "the departure of cluster %s (clusterID %s) is already recorded on %s/%s, at %s\n",
			target.Name, x, clusterResource, m.Own.Name, mine[x].UTC().Format(time.RFC3339))
		o.explain(tally(o.Now(), m, m.Own, x), target, self, m)
	}
	if !o.Wait {
		return nil
	}
	return o.wait(ctx, watched)
}

// connect reaches the API server of --context and reads the registry's Clusters there.
func (o *Options) connect(ctx context.Context) (*member, error) {
	m, err := kube.ConnectMember(ctx, o.Factory, o.member, o.clientOptions(), requestTimeout)
	if err != nil {
		return nil, err
	}
	if m.Own == nil {
		return nil, fmt.Errorf("context %s has no local Cluster (none has clusterID %s, the UID of its kube-system namespace): the controller has not bootstrapped it. Is \"kubectl registry serve\" running there?", m.Name, m.ID)
	}
	return m, nil
}

// target finds the leaving cluster's Cluster CR on the member.
func (o *Options) target(m *member) (*v1alpha1.Cluster, bool, error) {
	if o.Name == "" || o.Name == m.Own.Name {
		return m.Own, true, nil
	}
	var names []string
	for i := range m.Clusters {
		c := &m.Clusters[i]
		if c.Name == o.Name {
			return c, false, nil
		}
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return nil, false, fmt.Errorf("context %s has no Cluster %s: it is not a member of the group as %s sees it (its Clusters: %s; see \"kubectl registry status\")",
		m.Name, o.Name, m.Name, strings.Join(names, ", "))
}

// notReady returns why a Cluster is not Ready in its status, or nil.
func notReady(c *v1alpha1.Cluster) error {
	if c.Disabled() {
		return errors.New("it is disabled")
	}
	cond, ok := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionReady)
	if !ok {
		return errors.New("it has no Ready condition yet")
	}
	if cond.Status != corev1.ConditionTrue {
		//lint:ignore ST1005 the message begins with the condition's name, which keeps its case
		return fmt.Errorf("Ready=%s, %s: %s", cond.Status, cond.Reason, cond.Message)
	}
	return nil
}

// recordedBy returns the names of the other members whose Cluster, as held on the member
// (copies of their own), records the departure of x.
func recordedBy(m *member, x types.UID) []string {
	var out []string
	for i := range m.Clusters {
		c := &m.Clusters[i]
		if c.Spec.ClusterID == m.ID {
			continue
		}
		if d, _, _ := members.Records(c); !d[x].IsZero() {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out
}

// tally counts the records of x's departure as the member's Clusters show them: its own
// and the copies of the others' (the controllers count each member's own Cluster read
// from that member, with the same function).
func tally(now time.Time, m *member, own *v1alpha1.Cluster, x types.UID) members.Tally {
	clusters := make([]v1alpha1.Cluster, 0, len(m.Clusters))
	var views []members.View
	for i := range m.Clusters {
		c := m.Clusters[i]
		if c.Spec.ClusterID == m.ID {
			if c.Name == own.Name {
				c = *own
			}
			clusters = append(clusters, c)
			continue
		}
		clusters = append(clusters, c)
		views = append(views, members.View{Name: c.Name, ClusterID: c.Spec.ClusterID, Clusters: []v1alpha1.Cluster{c}})
	}
	return members.Decide(now, m.ID, clusters, views...).Tallies[x]
}

// record adds the departure of x to the member's own Cluster CR.
func (o *Options) record(ctx context.Context, m *member, x types.UID) (*v1alpha1.Cluster, error) {
	d, _ := members.ParseDepartures(m.Own.Annotations[v1alpha1.ConfirmedDeparturesAnnotation])
	d.Add(x, o.Now())
	updated := m.Own.DeepCopy()
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[v1alpha1.ConfirmedDeparturesAnnotation] = d.Format()
	if o.DryRun == cmdutil.DryRunClient {
		return updated, nil
	}
	opts := []client.PatchOption{client.FieldOwner(v1alpha1.FieldManager)}
	if o.DryRun == cmdutil.DryRunServer {
		opts = append(opts, client.DryRunAll)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	// Optimistic lock: a departure recorded at the same time by someone else is not lost.
	patch := client.MergeFromWithOptions(m.Own, client.MergeFromWithOptimisticLock{})
	if err := m.Client.Patch(ctx, updated, patch, opts...); err != nil {
		if apierrors.IsConflict(err) {
			return nil, fmt.Errorf("the Cluster %s on context %s changed while leave was writing it; nothing was written: run the same leave again: %w", m.Own.Name, m.Name, err)
		}
		return nil, fmt.Errorf("recording the departure on the Cluster %s on context %s: %w", m.Own.Name, m.Name, err)
	}
	return updated, nil
}

// print reports what was written.
func (o *Options) print(updated, target *v1alpha1.Cluster, self bool, m *member) error {
	if o.printer != nil {
		updated.SetManagedFields(nil)
		return o.printer.PrintObj(updated, o.Out)
	}
	suffix := ""
	switch o.DryRun {
	case cmdutil.DryRunClient:
		suffix = " (dry run)"
	case cmdutil.DryRunServer:
		suffix = " (server dry run)"
	}
	t := tally(o.Now(), m, updated, target.Spec.ClusterID)
	if t.InForce {
		fmt.Fprintf(o.Out, "%s/%s left the group (recorded on %s/%s on context %s)%s\n", clusterResource, target.Name, clusterResource, m.Own.Name, m.Name, suffix)
	} else {
		fmt.Fprintf(o.Out, "%s/%s: departure recorded on %s/%s on context %s, not in force yet%s\n", clusterResource, target.Name, clusterResource, m.Own.Name, m.Name, suffix)
	}
	o.explain(t, target, self, m)
	return nil
}

// explain says on stderr what the tally of a departure means: what happens next, or
// how many more members must record it and how.
func (o *Options) explain(t members.Tally, target *v1alpha1.Cluster, self bool, m *member) {
	x := target.Spec.ClusterID
	if t.InForce {
		if self {
			fmt.Fprintf(o.ErrOut, "The other members drop %s once their controllers read %s's Cluster; %s drops its copies of theirs. Synced objects are kept.\n", target.Name, target.Name, target.Name)
		} else {
			fmt.Fprintf(o.ErrOut, "A majority of the members record it (%s): the members drop %s, and %s drops its copies of theirs when its controller reads them. Synced objects are kept.\n", o.names(m, t.Records), target.Name, target.Name)
		}
		return
	}
	fmt.Fprintf(o.ErrOut, "%d of the %d members record it (%s, as the Clusters on %s show); it takes effect when %d more record it, or when %s records it itself.\n",
		len(t.Records), t.Members, o.names(m, t.Records), m.Name, t.Needed(), target.Name)
	var others []string
	recorded := map[types.UID]bool{}
	for _, id := range t.Records {
		recorded[id] = true
	}
	for i := range m.Clusters {
		c := &m.Clusters[i]
		if id := c.Spec.ClusterID; id != x && !recorded[id] && id != m.ID {
			others = append(others, c.Name)
		}
	}
	sort.Strings(others)
	if len(others) == 0 {
		fmt.Fprintf(o.ErrOut, "No other member can confirm it: in a group of two, only %s itself removes it (kubectl registry leave --context <context of %s>). Until then, the annotation %s=true on the Cluster %s here stops this cluster from using it.\n",
			target.Name, target.Name, v1alpha1.ClusterDisabledAnnotation, target.Name)
		return
	}
	fmt.Fprintf(o.ErrOut, "To confirm it on another member (%s), run there: kubectl registry leave %s --confirm --context <context of that member>\n", strings.Join(others, ", "), target.Name)
}

// names returns the names of the Clusters of ids on the member, in order.
func (o *Options) names(m *member, ids []types.UID) string {
	byID := map[types.UID]string{}
	for i := range m.Clusters {
		byID[m.Clusters[i].Spec.ClusterID] = m.Clusters[i].Name
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if n, ok := byID[id]; ok {
			out = append(out, n)
		} else {
			out = append(out, string(id))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// watchTarget is one cluster --wait reads: done when it holds no Cluster describing a
// cluster in gone (by clusterID), or, for the departed cluster itself, no Cluster but its own.
type watchTarget struct {
	name   string
	reader client.Reader
	// gone is the departed cluster's ID, or "" for the departed cluster itself.
	gone types.UID
	self types.UID
	// revocable is set when reader holds a credential that member issued to the departed
	// cluster (a cluster leaving by itself can read the members with nothing else) and
	// the member accepted it before the departure was recorded. The member revokes that
	// credential once it has deleted its Cluster of the departed cluster (see package
	// credentials), so its rejection (401) is the member being done, not a failure to
	// wait through: its API server stops accepting a revoked token within about 10 s,
	// possibly before a poll has seen the member without that Cluster.
	revocable bool
	// revoked is set when the target was found done by its rejection of the credential.
	revoked bool
}

// watchTargets picks what --wait reads: the member itself with the user's credentials, and
// every other Ready member (and the departed cluster, if Ready) with its reader kubeconfig
// from the member's copy of its Secret. Members that are not Ready are not waited for.
// When the member itself leaves, each other member is read once now, before the
// departure is recorded: a member that accepts the credential now and rejects it later
// has revoked it, which it does once it has dropped the member (watchTarget.revocable).
func (o *Options) watchTargets(ctx context.Context, m *member, target *v1alpha1.Cluster, self bool) []watchTarget {
	x := target.Spec.ClusterID
	var out []watchTarget
	if self {
		out = append(out, watchTarget{name: m.Name, reader: m.Client, self: m.ID})
	} else {
		out = append(out, watchTarget{name: m.Name, reader: m.Client, gone: x})
	}
	for i := range m.Clusters {
		c := &m.Clusters[i]
		if c.Spec.ClusterID == m.ID {
			continue
		}
		if err := notReady(c); err != nil {
			fmt.Fprintf(o.ErrOut, "not waiting for %s: %v\n", c.Name, err)
			continue
		}
		rd, err := o.reader(ctx, m, c)
		if err != nil {
			fmt.Fprintf(o.ErrOut, "not waiting for %s: %v\n", c.Name, err)
			continue
		}
		switch {
		case c.Spec.ClusterID == x:
			out = append(out, watchTarget{name: c.Name, reader: rd, self: x})
		case self:
			out = append(out, watchTarget{name: c.Name, reader: rd, gone: x, revocable: accepts(ctx, rd)})
		default:
			out = append(out, watchTarget{name: c.Name, reader: rd, gone: x})
		}
	}
	return out
}

// accepts reports whether the member rd reads accepts its credential now: a read of its
// Clusters succeeds.
func accepts(ctx context.Context, rd client.Reader) bool {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var list v1alpha1.ClusterList
	return rd.List(ctx, &list, client.Limit(1)) == nil
}

// reader builds a read-only client for a member from the member's copy of its reader
// Secret, sanitised like the controller does.
func (o *Options) reader(ctx context.Context, m *member, c *v1alpha1.Cluster) (client.Reader, error) {
	ref := c.Spec.AuthInfo.SecretRef
	ns := ref.Namespace
	if ns == "" {
		ns = o.Namespace
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var s corev1.Secret
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &s); err != nil {
		return nil, fmt.Errorf("reading its reader Secret %s/%s: %w", ns, ref.Name, err)
	}
	// The credential the member was issued by that cluster, as its controller uses it:
	// the shared reader token is recreated by the members when a departure is carried
	// out, their own credentials are not.
	conn := &s
	var received corev1.Secret
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.ReceivedReaderSecretName(c.Spec.ClusterID)}, &received); err == nil {
		// A sealed credential opens with the member's key, which its admin may read.
		var open members.Opener
		var keySecret corev1.Secret
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(o.Namespace), Name: v1alpha1.ReaderKeySecretName}, &keySecret); err == nil {
			if key, err := seal.ParsePrivateKey(keySecret.Data[v1alpha1.PrivateKeyKey]); err == nil {
				open = func(issuer types.UID, sealed []byte) ([]byte, error) { return key.Open(issuer, m.ID, sealed) }
			}
		}
		conn, _ = members.Choose(&s, &received, c.Spec.ClusterID, time.Now(), open)
	}
	cfg, err := kubeconfig.Parse(conn.Data[v1alpha1.KubeconfigKey])
	if err != nil {
		return nil, fmt.Errorf("its reader Secret %s/%s: %w", ns, ref.Name, err)
	}
	return o.Factory.Client(kube.Target{Name: c.Name, Config: cfg}, o.clientOptions())
}

// clientOptions are the settings of every client of leave.
func (o *Options) clientOptions() kube.ClientOptions {
	return kube.ClientOptions{Verb: "leave", Timeout: requestTimeout, Warnings: o.ErrOut}
}

// Check reports whether t is done, and what it waits for.
func (t *watchTarget) Check(ctx context.Context) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var list v1alpha1.ClusterList
	if err := t.reader.List(ctx, &list); err != nil {
		if t.revocable && apierrors.IsUnauthorized(err) {
			t.revoked = true
			return true, ""
		}
		return false, fmt.Sprintf("%s: cannot list its Clusters: %v", t.name, err)
	}
	var left []string
	for _, c := range list.Items {
		switch {
		case t.gone != "" && c.Spec.ClusterID == t.gone:
			left = append(left, c.Name)
		case t.gone == "" && c.Spec.ClusterID != t.self:
			left = append(left, c.Name)
		}
	}
	if len(left) == 0 {
		return true, ""
	}
	sort.Strings(left)
	return false, fmt.Sprintf("%s still has the Cluster %s", t.name, strings.Join(left, ", "))
}

// wait polls the targets until each is done, printing progress on stderr.
func (o *Options) wait(ctx context.Context, targets []watchTarget) error {
	interval := o.PollInterval
	if interval <= 0 {
		interval = pollInterval
	}
	ts := make([]cmdutil.WaitTarget, len(targets))
	for i := range targets {
		ts[i] = &targets[i]
	}
	still, err := cmdutil.WaitAll(ctx, o.Timeout, interval, ts, o.ErrOut, func(i int) {
		if targets[i].revoked {
			fmt.Fprintf(o.ErrOut, "%s: done (it revoked the credential it issued to the departed cluster, which it does once it has dropped it)\n", targets[i].name)
			return
		}
		fmt.Fprintf(o.ErrOut, "%s: done\n", targets[i].name)
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s waiting for the controllers: %s. The departure is recorded and the controllers carry it out when they can; see \"kubectl registry status\" and the controllers' logs",
			o.Timeout, strings.Join(still, "; "))
	}
	return err
}
