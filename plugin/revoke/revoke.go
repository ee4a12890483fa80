// Package revoke implements "kubectl registry revoke": it revokes, on one member, every
// token of the reader that member issued to one peer, without leave and without
// disturbing the other members.
//
// Every member X issues each peer P a reader ServiceAccount of its own,
// <namespace>-readers/cluster-registry-reader-<ReaderKey(P)>, and keeps P's token, sealed
// to P's key, in the Secret <namespace>/cluster-registry-reader-for-<ReaderKey(P)>. revoke
// deletes that ServiceAccount on X (with a UID precondition), which makes X's API server
// reject every token of it, and, unless --keep-shared, X's shared reader ServiceAccount
// <namespace>/cluster-registry-reader, whose token any reader token could read. X's
// controller recreates both (reconciler/credentials and reconciler/bootstrap) and issues
// new tokens: P gets a new credential sealed to its key, the members receive X's new
// shared token, and their own credentials are untouched.
package revoke

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
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

const (
	revokeLong = `
		Revoke, on the cluster of --context, every token of the reader it issued to the
		peer CLUSTER (the Cluster CR named CLUSTER there), without leave.

		Every member issues each peer a reader ServiceAccount of its own, named
		cluster-registry-reader-ID (ID: the peer's clusterID) in the readers namespace
		(cluster-registry-readers). revoke deletes the one of CLUSTER, so that the API
		server of --context rejects every new request with a token of it within seconds (a
		watch opened before keeps streaming until the API server ends it, 30 to 60 minutes
		with its default --min-request-timeout: revocation closes no open stream), and, unless
		--keep-shared, the member's shared reader ServiceAccount cluster-registry-reader of
		the registry namespace, whose token any reader token could read. The controller of
		--context recreates both and issues new tokens: CLUSTER gets a new credential,
		sealed to its own key, and the other members receive the new shared token; their
		own credentials are not touched. Run it when a reader token may have leaked (a
		peer's Secret was exposed, a node of a peer was compromised).

		When the member has issued CLUSTER no reader yet, revoke says so on stderr and, unless
		--keep-shared, still revokes the shared reader; with --keep-shared there is nothing to
		revoke, which is an error.

		--wait waits, up to --timeout, until the controller of --context has issued the new
		credentials: the Secret cluster-registry-reader-for-ID holding CLUSTER's credential
		and, unless --keep-shared, the shared reader Secret the member's own Cluster names
		hold tokens of the recreated ServiceAccounts.`

	revokeExample = `
		# east revokes every token it issued to west, and its shared reader token
		kubectl registry revoke west --context east --wait

		# Only west's tokens: keep east's shared reader token
		kubectl registry revoke west --context east --keep-shared

		# Show what would be deleted, and delete nothing
		kubectl registry revoke west --context east --dry-run=server`
)

const (
	// DefaultTimeout is the default of --timeout.
	DefaultTimeout = 2 * time.Minute
	// requestTimeout bounds every request revoke makes.
	requestTimeout = 10 * time.Second
	// pollInterval is how often --wait looks.
	pollInterval = time.Second
)

// Options holds the flags and the state of "kubectl registry revoke".
type Options struct {
	// Name is the Cluster CR (as named on --context) of the peer whose reader is revoked.
	Name string
	// Namespace is the registry namespace; the per-peer readers live in
	// v1alpha1.ReadersNamespace(Namespace).
	Namespace string
	// KeepShared keeps the shared reader ServiceAccount (and its token).
	KeepShared bool
	// DryRun is cmdutil.DryRunNone, cmdutil.DryRunClient or cmdutil.DryRunServer.
	DryRun cmdutil.DryRunStrategy
	// Wait waits, up to Timeout, until the controller has issued the new credentials.
	Wait    bool
	Timeout time.Duration
	// PollInterval is how often --wait polls; zero means one second.
	PollInterval time.Duration

	// Factory resolves the context and builds the clients.
	Factory kube.Factory

	// member is the cluster of --context; set by Complete.
	member kube.Target
	genericiooptions.IOStreams
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		Namespace: v1alpha1.DefaultNamespace,
		DryRun:    cmdutil.DryRunNone,
		Timeout:   DefaultTimeout,
		Factory:   f,
		IOStreams: streams,
	}
}

// NewCmdRevoke returns the "revoke" command. f is the Factory of the
// root command's kubeconfig flags: they name the member whose reader is revoked.
func NewCmdRevoke(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdRevoke(NewOptions(f, streams))
}

// newCmdRevoke returns the "revoke" command of o (tests set its clock and polls).
func newCmdRevoke(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "revoke CLUSTER [--context MEMBER] [--keep-shared] [--wait]",
		Short:   "Revoke the reader tokens a member issued to one peer (the controller issues new ones)",
		Long:    templates.LongDesc(revokeLong),
		Example: templates.Examples(revokeExample),
		Args:    cmdutil.UsageErrorArgs(cobra.ExactArgs(1)),
		RunE:    cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of revoke to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	// Shadows the root's --namespace: for revoke it is the registry namespace.
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace,
		"Registry namespace: where the shared reader lives; the per-peer readers live in its readers namespace (NAMESPACE-readers).")
	fs.BoolVar(&o.KeepShared, "keep-shared", o.KeepShared,
		"Keep the member's shared reader ServiceAccount: revoke only the reader issued to CLUSTER.")
	cmdutil.AddDryRunFlag(cmd,
		`Must be "none", "client" or "server". With "client", only print what would be deleted; with "server", also submit the deletions as dry-run requests. Nothing is deleted either way.`)
	fs.BoolVar(&o.Wait, "wait", o.Wait,
		"Wait until the controller has issued the new credentials (progress on stderr).")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits.")
}

// Complete takes the argument, parses --dry-run and resolves the context. It contacts no
// API server.
func (o *Options) Complete(cmd *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Name = args[0]
	}
	var err error
	if o.DryRun, err = cmdutil.GetDryRunStrategy(cmd, cmdutil.DryRunNone, cmdutil.DryRunClient, cmdutil.DryRunServer); err != nil {
		return err
	}
	targets, err := o.Factory.Targets(cmd, nil)
	if err != nil {
		return err
	}
	o.member = targets[0]
	// controller-runtime's clients warn with a stack trace when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	return nil
}

// Validate checks the flags. It does no I/O.
func (o *Options) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("cluster name %q: %s", o.Name, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
	} else if msgs := validation.IsDNS1123Label(v1alpha1.ReadersNamespace(o.Namespace)); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--namespace %q: its readers namespace %s: %s", o.Namespace, v1alpha1.ReadersNamespace(o.Namespace), strings.Join(msgs, "; ")))
	}
	if o.Wait && o.DryRun != cmdutil.DryRunNone {
		errs = append(errs, errors.New("--wait cannot be used with --dry-run: nothing is deleted to wait for"))
	}
	if o.Wait && o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout must be positive, got %s", o.Timeout))
	}
	return errors.Join(errs...)
}

// member is what the verb knows of the cluster of --context.
type member = kube.Member

// revoked is a ServiceAccount revoke deleted, for --wait: done once the controller has
// recreated it (another UID) and the Secret holding its token was issued for the new one.
type revoked struct {
	sa     types.NamespacedName
	oldUID types.UID
	secret types.NamespacedName
	// what the done line says: "west's new credential", "the new shared reader token".
	what string
}

// Run deletes the ServiceAccounts and, with --wait, waits for the controller.
func (o *Options) Run(ctx context.Context) error {
	m, err := o.connect(ctx)
	if err != nil {
		return err
	}
	peer, err := o.target(m)
	if err != nil {
		return err
	}
	waitFor, done, err := o.revokePerPeer(ctx, m, peer)
	if err != nil || done {
		return err
	}
	if !o.KeepShared {
		rev, err := o.revokeShared(ctx, m)
		if err != nil {
			return err
		}
		if rev != nil {
			waitFor = append(waitFor, *rev)
		}
	}
	switch {
	case len(waitFor) > 0 && waitFor[0].sa == o.readerOf(peer):
		fmt.Fprintf(o.ErrOut, "The controller of %s issues new tokens: %s gets a new credential sealed to its key; the other members keep their own credentials.\n", m.Name, peer.Name)
	case len(waitFor) > 0:
		fmt.Fprintf(o.ErrOut, "The controller of %s issues a new shared reader token; the members keep their own credentials.\n", m.Name)
	}
	if !o.Wait || len(waitFor) == 0 {
		return nil
	}
	return o.wait(ctx, m, waitFor)
}

// dryRunSuffix is what the lines saying what was deleted end with: the dry run, if any.
func (o *Options) dryRunSuffix() string {
	switch o.DryRun {
	case cmdutil.DryRunClient:
		return " (dry run)"
	case cmdutil.DryRunServer:
		return " (server dry run)"
	}
	return ""
}

// readerOf is the key of the ServiceAccount of the reader issued to peer.
func (o *Options) readerOf(peer *v1alpha1.Cluster) types.NamespacedName {
	return types.NamespacedName{Namespace: v1alpha1.ReadersNamespace(o.Namespace), Name: v1alpha1.ReaderServiceAccountName(peer.Spec.ClusterID)}
}

// revokePerPeer deletes the reader member m issued peer, and says so. It returns what
// --wait waits for (the new credential m issues peer, unless peer's departure or m's
// own is in force on m), and done when there is nothing more to do: peer's departure
// has revoked its reader already and --keep-shared keeps the shared one.
func (o *Options) revokePerPeer(ctx context.Context, m *member, peer *v1alpha1.Cluster) (waitFor []revoked, done bool, err error) {
	suffix := o.dryRunSuffix()
	perPeer := o.readerOf(peer)
	uid, found, err := o.delete(ctx, m, perPeer, fmt.Sprintf("the reader of cluster %s", peer.Name))
	if err != nil {
		return nil, false, err
	}
	// A cluster whose departure is in force on the member is issued nothing again: its
	// reader is revoked for good, and --wait has no new credential to wait for.
	// Nor does a member that left the group itself issue anything to anyone.
	decided := members.Decided(m.Own)
	_, departed := decided[peer.Spec.ClusterID]
	_, selfLeft := decided[m.ID]
	switch {
	case found && selfLeft:
		fmt.Fprintf(o.Out, "serviceaccount/%s deleted on %s (every token %s issued to %s is revoked)%s\n", perPeer.Name, m.Name, m.Own.Name, peer.Name, suffix)
		fmt.Fprintf(o.ErrOut, "%s has left the group (its own departure is in force on it): it issues no new credential to any peer\n", m.Own.Name)
	case found && departed:
		fmt.Fprintf(o.Out, "serviceaccount/%s deleted on %s (every token %s issued to %s is revoked)%s\n", perPeer.Name, m.Name, m.Own.Name, peer.Name, suffix)
		fmt.Fprintf(o.ErrOut, "%s has left the group (its departure is in force on %s): %s issues it no new credential\n", peer.Name, m.Name, m.Own.Name)
	case found:
		fmt.Fprintf(o.Out, "serviceaccount/%s deleted on %s (every token %s issued to %s is revoked)%s\n", perPeer.Name, m.Name, m.Own.Name, peer.Name, suffix)
		waitFor = append(waitFor, revoked{
			sa: perPeer, oldUID: uid,
			secret: types.NamespacedName{Namespace: o.Namespace, Name: v1alpha1.IssuedReaderSecretName(peer.Spec.ClusterID)},
			what:   fmt.Sprintf("%s issued %s a new credential", m.Own.Name, peer.Name),
		})
	case departed:
		// Revoked when the departure reached this member: nothing left of it to revoke
		// or to wait for.
		fmt.Fprintf(o.ErrOut, "%s has left the group (its departure is in force on %s): its reader on %s was revoked already, and %s issues it no new credential\n",
			peer.Name, m.Name, m.Name, m.Own.Name)
		if o.KeepShared {
			return nil, true, nil
		}
	default:
		if o.KeepShared {
			return nil, false, fmt.Errorf("no reader of %s on %s to revoke: %s has not issued %s a reader yet (no ServiceAccount %s/%s; see \"kubectl registry status --context %s\"), and --keep-shared keeps the shared one: nothing was revoked",
				peer.Name, m.Name, m.Own.Name, peer.Name, perPeer.Namespace, perPeer.Name, m.Name)
		}
		fmt.Fprintf(o.ErrOut, "no reader of %s on %s to revoke: %s has not issued %s a reader yet (no ServiceAccount %s/%s); the shared reader is still revoked\n",
			peer.Name, m.Name, m.Own.Name, peer.Name, perPeer.Namespace, perPeer.Name)
	}
	return waitFor, false, nil
}

// revokeShared deletes the shared reader of member m, and says so. It returns what
// --wait waits for (the new shared reader token), or nil when there was none.
func (o *Options) revokeShared(ctx context.Context, m *member) (*revoked, error) {
	shared := types.NamespacedName{Namespace: o.Namespace, Name: v1alpha1.ReaderName}
	uid, found, err := o.delete(ctx, m, shared, "the shared reader")
	if err != nil {
		return nil, err
	}
	if !found {
		fmt.Fprintf(o.ErrOut, "no shared reader on %s to revoke (no ServiceAccount %s/%s): its controller creates one\n", m.Name, shared.Namespace, shared.Name)
		return nil, nil
	}
	fmt.Fprintf(o.Out, "serviceaccount/%s deleted on %s (the shared reader token is revoked; the controller issues a new one)%s\n", shared.Name, m.Name, o.dryRunSuffix())
	ref := m.Own.Spec.AuthInfo.SecretRef
	secret := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	if secret.Namespace == "" {
		secret.Namespace = o.Namespace
	}
	if secret.Name == "" {
		secret.Name = m.Own.Name
	}
	return &revoked{sa: shared, oldUID: uid, secret: secret, what: fmt.Sprintf("%s issued a new shared reader token", m.Own.Name)}, nil
}

// connect reaches the API server of --context, checks that the registry is installed and
// reads its Clusters.
func (o *Options) connect(ctx context.Context) (*member, error) {
	m, err := kube.ConnectMember(ctx, o.Factory, o.member, o.clientOptions(), requestTimeout)
	if err != nil {
		return nil, err
	}
	name := m.Name
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	for _, nsName := range []string{o.Namespace, v1alpha1.ReadersNamespace(o.Namespace)} {
		var ns corev1.Namespace
		if err := m.Client.Get(rctx, client.ObjectKey{Name: nsName}, &ns); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("the registry is not installed on context %s: the namespace %s is missing; run: kubectl registry install --context %s (or pass --namespace if the registry lives in another namespace)", name, nsName, name)
			}
			return nil, fmt.Errorf("context %s: reading the namespace %s: %w", name, nsName, err)
		}
	}
	if m.Own == nil {
		return nil, fmt.Errorf("context %s has no local Cluster (none has clusterID %s, the UID of its kube-system namespace): the controller has not bootstrapped it, so it has issued no reader. Is \"kubectl registry serve\" running there?", name, m.ID)
	}
	return m, nil
}

// target finds the peer's Cluster CR on the member; the member's own Cluster is refused.
func (o *Options) target(m *member) (*v1alpha1.Cluster, error) {
	var names []string
	for i := range m.Clusters {
		c := &m.Clusters[i]
		if c.Name != o.Name {
			names = append(names, c.Name)
			continue
		}
		if c.Spec.ClusterID == m.ID || c.Status.Type == v1alpha1.ClusterTypeLocal {
			return nil, fmt.Errorf("cluster %s is the cluster of context %s itself: a member issues no reader to itself. To revoke what another member issued to %s, run revoke there: kubectl registry revoke %s --context MEMBER",
				c.Name, m.Name, c.Name, c.Name)
		}
		if c.Spec.ClusterID == "" {
			return nil, fmt.Errorf("the Cluster %s on context %s has no spec.clusterID: it names no cluster %s could have issued a reader to", c.Name, m.Name, m.Name)
		}
		return c, nil
	}
	sort.Strings(names)
	return nil, fmt.Errorf("context %s has no Cluster %s: it is not a member of the group as %s sees it (its Clusters: %s; see \"kubectl registry status\")",
		m.Name, o.Name, m.Name, strings.Join(names, ", "))
}

// delete deletes the ServiceAccount key on the member, unless it is missing, with a
// precondition on the UID it read: a ServiceAccount the controller recreated meanwhile
// is not deleted. It returns the UID of the ServiceAccount deleted and whether there was
// one. A client dry run only reads it.
func (o *Options) delete(ctx context.Context, m *member, key types.NamespacedName, what string) (types.UID, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var sa corev1.ServiceAccount
	if err := m.Client.Get(ctx, client.ObjectKey(key), &sa); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, kube.ExplainAdmin(fmt.Errorf("context %s: reading %s, the ServiceAccount %s/%s: %w", m.Name, what, key.Namespace, key.Name, err),
			o.member, "revoking a reader needs the rights to read and delete ServiceAccounts in "+key.Namespace)
	}
	if o.DryRun == cmdutil.DryRunClient {
		return sa.UID, true, nil
	}
	uid := sa.UID
	opts := []client.DeleteOption{client.Preconditions{UID: &uid}}
	if o.DryRun == cmdutil.DryRunServer {
		opts = append(opts, client.DryRunAll)
	}
	if err := m.Client.Delete(ctx, &sa, opts...); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return "", false, fmt.Errorf("%s, the ServiceAccount %s/%s on context %s, was deleted or replaced while revoke was deleting it (its tokens are revoked if it was): run the same revoke again to be sure: %w",
				what, key.Namespace, key.Name, m.Name, err)
		}
		return "", false, kube.ExplainAdmin(fmt.Errorf("context %s: deleting %s, the ServiceAccount %s/%s: %w", m.Name, what, key.Namespace, key.Name, err),
			o.member, "revoking a reader needs the rights to read and delete ServiceAccounts in "+key.Namespace)
	}
	return uid, true, nil
}

// clientOptions are the settings of every client of revoke.
func (o *Options) clientOptions() kube.ClientOptions {
	return kube.ClientOptions{Verb: "revoke", Timeout: requestTimeout, Warnings: o.ErrOut}
}

// waitTarget is one credential --wait waits for.
type waitTarget struct {
	member string // the context, for messages
	reader client.Reader
	revoked
}

// Check reports whether the controller has recreated the ServiceAccount and issued the
// Secret for the new one.
func (t waitTarget) Check(ctx context.Context) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var sa corev1.ServiceAccount
	if err := t.reader.Get(ctx, client.ObjectKey(t.sa), &sa); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("on %s, the ServiceAccount %s/%s is not recreated yet", t.member, t.sa.Namespace, t.sa.Name)
		}
		return false, fmt.Sprintf("on %s, cannot read the ServiceAccount %s/%s: %v", t.member, t.sa.Namespace, t.sa.Name, err)
	}
	if sa.UID == t.oldUID {
		return false, fmt.Sprintf("on %s, the ServiceAccount %s/%s is still the revoked one (being deleted)", t.member, t.sa.Namespace, t.sa.Name)
	}
	var s corev1.Secret
	if err := t.reader.Get(ctx, client.ObjectKey(t.secret), &s); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("on %s, the Secret %s/%s is not issued yet", t.member, t.secret.Namespace, t.secret.Name)
		}
		return false, fmt.Sprintf("on %s, cannot read the Secret %s/%s: %v", t.member, t.secret.Namespace, t.secret.Name, err)
	}
	if got := s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation]; got != string(sa.UID) {
		return false, fmt.Sprintf("on %s, the Secret %s/%s still holds a token of the revoked ServiceAccount %s/%s", t.member, t.secret.Namespace, t.secret.Name, t.sa.Namespace, t.sa.Name)
	}
	return true, ""
}

// wait polls the targets until the controller has issued every new credential, printing
// progress on stderr.
func (o *Options) wait(ctx context.Context, m *member, revs []revoked) error {
	interval := o.PollInterval
	if interval <= 0 {
		interval = pollInterval
	}
	ts := make([]cmdutil.WaitTarget, len(revs))
	for i := range revs {
		ts[i] = waitTarget{member: m.Name, reader: m.Client, revoked: revs[i]}
	}
	still, err := cmdutil.WaitAll(ctx, o.Timeout, interval, ts, o.ErrOut, func(i int) {
		fmt.Fprintln(o.ErrOut, revs[i].what)
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s waiting for the controller of %s: %s. The old tokens are revoked; the controller issues the new ones when it runs: see \"kubectl registry status --context %s\" and the controller's logs",
			o.Timeout, m.Name, strings.Join(still, "; "), m.Name)
	}
	return err
}
