package join

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

// join --legacy: side B runs the seed's cluster-registry-controller, which cannot open
// the sealed credential side A's controller issues it. A's admin names B a legacy peer on
// A (v1alpha1.LegacyPeerAnnotation on A's Cluster of B, written with the copy of B's
// Cluster), A's controller issues B a reader credential in the clear in its readers
// namespace, and join writes that credential on B as the reader Secret A's Cluster names
// there, then A's Cluster (docs/migrate.md, step 5).

const (
	// maxUIDLen bounds the kube-system UID a side's API server returns (a UID is 36
	// bytes): it names Secrets and shows in messages.
	maxUIDLen = 128
	// maxConditionMessage bounds how much of a condition's message an error quotes.
	maxConditionMessage = 1024
)

// checkNames checks the names a side's local Cluster gives, which become names of the
// objects written on the other side and show in messages: a peer writes them, and its
// CRD need not bound them.
func (s *side) checkNames() error {
	if errs := validation.IsDNS1123Subdomain(s.local.Name); len(errs) > 0 {
		return fmt.Errorf("the local Cluster %s on context %s has no valid name: %s", document.Quote(s.local.Name), s.name, strings.Join(errs, "; "))
	}
	ref := s.local.Spec.AuthInfo.SecretRef
	if (ref.Name != "" && len(validation.IsDNS1123Subdomain(ref.Name)) > 0) || (ref.Namespace != "" && len(validation.IsDNS1123Label(ref.Namespace)) > 0) {
		return fmt.Errorf("the local Cluster %s on context %s names no valid reader Secret (namespace %s, name %s)",
			s.local.Name, s.name, document.Quote(ref.Namespace), document.Quote(ref.Name))
	}
	return nil
}

// tokenExpiry is when the token of a reader Secret's kubeconfig expires, as it states
// itself; ok is false for a token that states no expiry, or no token.
func tokenExpiry(secret *corev1.Secret) (exp time.Time, ok bool) {
	if secret == nil {
		return time.Time{}, false
	}
	r, ok := kubeconfig.Read(secret.Data[v1alpha1.KubeconfigKey])
	if !ok || r.Token == "" {
		return time.Time{}, false
	}
	exp, _, ok = kubeconfig.TokenTimes(r.Token)
	return exp, ok
}

// runsSeed reports whether side s runs the seed's cluster-registry-controller, as its own
// reader Secret (the one its local Cluster names) tells: the seed's controller keeps a
// long-lived ServiceAccount token there, which states no expiry, where kubectl-registry's
// keeps a token that expires (and renews it). The reader key its Cluster advertises
// proves nothing: a cluster that went back to the seed's controller keeps the key
// kubectl-registry advertised. A side whose Secret was not read is not taken for one.
func (s *side) runsSeed() bool {
	if s.secret == nil {
		return false
	}
	if r, ok := kubeconfig.Read(s.secret.Data[v1alpha1.KubeconfigKey]); !ok || r.Token == "" {
		return false
	}
	_, ok := tokenExpiry(s.secret)
	return !ok
}

// controllerEvidence says what runsSeed read on side s, for a message.
func (s *side) controllerEvidence() string {
	what := fmt.Sprintf("the reader Secret %s/%s of its Cluster %s", s.secret.Namespace, s.secret.Name, s.local.Name)
	if exp, ok := tokenExpiry(s.secret); ok {
		return fmt.Sprintf("%s holds a token that expires (at %s), as kubectl-registry's controller writes", what, exp.UTC().Format(time.RFC3339))
	}
	return what + " holds a token that states no expiry, as the seed's controller writes (kubectl-registry's expire)"
}

// checkControllers reads each side's reader Secret and checks that the sides run the
// controllers the mode of join needs: kubectl-registry's on both without --legacy;
// kubectl-registry's on A and the seed's on B with it. Side B's Secret is only read for
// this with --one-way: a failure there is not join's concern.
func (o *Options) checkControllers(ctx context.Context) error {
	a, b := o.a, o.b
	if err := a.readSecret(ctx, o.Namespace); err != nil {
		return err
	}
	if err := b.readSecret(ctx, o.Namespace); err != nil && !o.OneWay {
		return err
	}
	seedA, seedB := a.runsSeed(), b.runsSeed()
	switch {
	case seedA && seedB:
		return fmt.Errorf("context %s and context %s both run the seed's cluster-registry-controller (%s; %s): join needs kubectl-registry's controller on side A (--context), and on side B unless --legacy. Between two members running the seed's, copy the Clusters and reader Secrets as the seed's README does (docs/migrate.md, Going back, step 3)",
			a.name, b.name, a.controllerEvidence(), b.controllerEvidence())
	case seedA:
		return fmt.Errorf("context %s runs the seed's cluster-registry-controller: %s. Side A (--context) must run kubectl-registry's, which issues side B the credential: swap --context and --peer-context and pass --legacy (docs/migrate.md, step 5)",
			a.name, a.controllerEvidence())
	case seedB && !o.Legacy:
		return fmt.Errorf("context %s runs the seed's cluster-registry-controller: %s. It cannot use the shared reader Secret of context %s that this join would copy to it (a bootstrap credential, refused listing namespaces): pass --legacy to name it a legacy peer on %s and copy it the credential %s issues it in the clear (docs/migrate.md, step 5)",
			b.name, b.controllerEvidence(), a.name, a.name, a.name)
	case !seedB && o.Legacy:
		return fmt.Errorf("context %s runs kubectl-registry's controller, not the seed's: %s. It opens the sealed credential %s issues it and needs no legacy consent: run join without --legacy (if %s names it a legacy peer, remove that first: kubectl annotate cluster %s %s- %s)",
			b.name, b.controllerEvidence(), a.name, a.name, b.local.Name, v1alpha1.LegacyPeerAnnotation, a.flags)
	case o.Legacy:
		return a.readersInstalled(ctx, o.Namespace)
	}
	return nil
}

// readersInstalled checks the readers namespace, where kubectl-registry's controller
// keeps the credentials it issues.
func (s *side) readersInstalled(ctx context.Context, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	readers := v1alpha1.ReadersNamespace(namespace)
	if err := s.client.Get(ctx, client.ObjectKey{Name: readers}, &corev1.Namespace{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the readers namespace %s is missing on context %s: kubectl-registry's controller keeps there the credentials it issues; run: kubectl registry install %s",
				readers, s.name, s.flags)
		}
		return fmt.Errorf("context %s: reading the namespace %s: %w", s.name, readers, err)
	}
	return nil
}

// staleConsent refuses to join, without --legacy, two sides of which one still names the
// other a legacy peer: the other runs kubectl-registry (checkControllers), and a legacy
// peer is read with the shared reader Secret as a full credential, which kubectl-registry
// refuses.
func staleConsent(to, from *side, items []item) error {
	if c := consented(items); c != nil {
		return fmt.Errorf("context %s names context %s a legacy peer (annotation %s=true on its Cluster %s), but %s runs kubectl-registry's controller: remove that consent first, which revokes the credential issued in the clear: kubectl annotate cluster %s %s- %s",
			to.name, from.name, v1alpha1.LegacyPeerAnnotation, c.Name, from.name, c.Name, v1alpha1.LegacyPeerAnnotation, to.flags)
	}
	return nil
}

// planLegacy plans join --legacy once both sides' sources are prepared: on A, B's reader
// Secret and B's Cluster with the consent; on B, the credential A issued B as A's reader
// Secret, then A's Cluster, when A has issued it already to B as a consented legacy
// peer (else finishLegacy waits for it once the consent is written). The names on B are
// checked now with A's shared reader Secret in place of the credential, so that nothing
// is written when they clash.
func (o *Options) planLegacy(ctx context.Context, rejoin []*side) (plan, error) {
	a, b := o.a, o.b
	if b.copies.Cluster.Annotations == nil {
		b.copies.Cluster.Annotations = map[string]string{}
	}
	b.copies.Cluster.Annotations[v1alpha1.LegacyPeerAnnotation] = "true"
	onA, err := a.checkTarget(ctx, b, o.Namespace)
	if err != nil {
		return plan{}, err
	}
	if _, err := b.checkTarget(ctx, a, o.Namespace); err != nil {
		return plan{}, err
	}
	p := plan{rejoin: rejoin, writes: []sideWrites{{on: a, from: b, items: onA}}}
	if consented(onA) == nil {
		return p, nil
	}
	cred, _ := a.legacyCredential(ctx, o.Namespace, b.id, o.now())
	if cred == nil {
		return p, nil
	}
	w, err := o.legacyWrites(ctx, cred)
	if err != nil {
		return plan{}, err
	}
	p.writes = append(p.writes, w)
	return p, nil
}

// consented returns the Cluster among the existing objects of items when it names its
// cluster a legacy peer where it is, else nil.
func consented(items []item) *v1alpha1.Cluster {
	for _, it := range items {
		if c, ok := it.existing.(*v1alpha1.Cluster); ok && v1alpha1.IsLegacyPeer(c) {
			return c
		}
	}
	return nil
}

// legacyWrites checks the credential cred that A issued B, as B's controller will use it,
// and plans its writes on B.
func (o *Options) legacyWrites(ctx context.Context, cred *corev1.Secret) (sideWrites, error) {
	a, b := o.a, o.b
	c, err := legacyCopies(a.copies, cred, a.advertise)
	if err != nil {
		return sideWrites{}, fmt.Errorf("the credential %s/%s on context %s: %w", cred.Namespace, cred.Name, a.name, err)
	}
	// Side A as it gives B the credential: its token is checked, and the hints name
	// that Secret (deleting it makes A's controller issue a new one).
	issued := *a
	issued.secret, issued.copies = cred, c
	if err := issued.checkAdvertised(o.AllowLoopback, b); err != nil {
		return sideWrites{}, err
	}
	if err := issued.checkToken(ctx, b, o.Factory, o.clientOptions()); err != nil {
		return sideWrites{}, err
	}
	items, err := b.checkTarget(ctx, &issued, o.Namespace)
	if err != nil {
		return sideWrites{}, err
	}
	return sideWrites{on: b, from: &issued, items: items}, nil
}

// legacyCopies are the objects written on a legacy peer: A's Cluster as join copies it,
// and under the name, type and labels of A's reader Secret copy (the Secret A's Cluster
// names there), the kubeconfig of the credential cred that A issued the peer in the
// clear, its server rewritten to server when set, with the times of its token.
func legacyCopies(shared copies, cred *corev1.Secret, server string) (copies, error) {
	data := cred.Data[v1alpha1.KubeconfigKey]
	if server != "" {
		rewritten, _, err := rewriteServer(data, server)
		if err != nil {
			return copies{}, err
		}
		data = rewritten
	}
	s := shared.Secret.DeepCopy()
	s.Annotations = nil
	for _, k := range []string{v1alpha1.TokenExpiresAtAnnotation, v1alpha1.TokenIssuedAtAnnotation} {
		if v, ok := cred.Annotations[k]; ok {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[k] = v
		}
	}
	s.Data = map[string][]byte{v1alpha1.KubeconfigKey: data}
	return copies{Secret: s, Cluster: shared.Cluster}, nil
}

// legacyCredential reads the credential in the clear side s issued the legacy peer id,
// and returns it when it is usable, else nil and what is wrong with it.
func (s *side) legacyCredential(ctx context.Context, namespace string, id types.UID, now time.Time) (*corev1.Secret, string) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var cred corev1.Secret
	key := client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(namespace), Name: v1alpha1.LegacyReaderSecretName(id)}
	if err := s.client.Get(ctx, key, &cred); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "is missing"
		}
		return nil, fmt.Sprintf("cannot be read: %v", err)
	}
	if peer := cred.Annotations[v1alpha1.PeerClusterIDAnnotation]; peer != string(id) {
		return nil, fmt.Sprintf("is issued to cluster %s, not %s", document.Quote(peer), id)
	}
	if cred.Type != v1alpha1.SecretTypeClusterRegistry {
		return nil, fmt.Sprintf("has type %q, not %q", cred.Type, v1alpha1.SecretTypeClusterRegistry)
	}
	if _, err := kubeconfig.Parse(cred.Data[v1alpha1.KubeconfigKey]); err != nil {
		return nil, fmt.Sprintf("holds no valid kubeconfig: %v", err)
	}
	exp, ok := tokenExpiry(&cred)
	switch {
	case !ok:
		return nil, "holds a token that states no expiry"
	case !now.Before(exp):
		return nil, "holds a token that expired at " + exp.UTC().Format(time.RFC3339)
	}
	return &cred, ""
}

// credentialTarget is what finishLegacy waits for: a usable credential side a issued
// the legacy peer b. Check keeps it in cred.
type credentialTarget struct {
	o    *Options
	cred *corev1.Secret
}

// Check reads the credential once.
func (t *credentialTarget) Check(ctx context.Context) (bool, string) {
	o := t.o
	cred, why := o.a.legacyCredential(ctx, o.Namespace, o.b.id, o.now())
	if cred != nil {
		t.cred = cred
		return true, ""
	}
	return false, fmt.Sprintf("on %s, the credential for %s (Secret %s/%s) %s",
		o.a.name, o.b.name, v1alpha1.ReadersNamespace(o.Namespace), v1alpha1.LegacyReaderSecretName(o.b.id), why)
}

// awaitCredential waits up to --timeout for A's controller to issue B a usable
// credential in the clear; on timeout the error says which Secret it waited for and what
// A's Cluster of B says about it (its ReaderKeyReady condition).
func (o *Options) awaitCredential(ctx context.Context) (*corev1.Secret, error) {
	interval := o.PollInterval
	if interval <= 0 {
		interval = pollInterval
	}
	t := &credentialTarget{o: o}
	still, err := cmdutil.WaitAll(ctx, o.Timeout, interval, []cmdutil.WaitTarget{t}, o.ErrOut, func(int) {})
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("timed out after %s waiting for the controller of context %s to issue context %s a reader credential in the clear: %s. %s. Is \"kubectl registry serve\" running on %s?",
			o.Timeout, o.a.name, o.b.name, strings.Join(still, "; "), o.readerKeyReady(ctx), o.a.name)
	}
	if err != nil {
		return nil, err
	}
	return t.cred, nil
}

// readerKeyReady says what A's Cluster of B reports about the credential A issues B.
func (o *Options) readerKeyReady(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	name := o.b.copies.Cluster.Name
	var c v1alpha1.Cluster
	if err := o.a.client.Get(ctx, client.ObjectKey{Name: name}, &c); err != nil {
		return fmt.Sprintf("On %s, the Cluster %s cannot be read: %v", o.a.name, name, err)
	}
	cond, ok := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionReaderKeyReady)
	if !ok {
		return fmt.Sprintf("On %s, the Cluster %s reports no %s condition yet: its controller has not read %s", o.a.name, name, v1alpha1.ClusterConditionReaderKeyReady, o.b.name)
	}
	msg := cond.Message
	if len(msg) > maxConditionMessage {
		msg = strings.ToValidUTF8(msg[:maxConditionMessage], "") + "..."
	}
	return fmt.Sprintf("On %s, the Cluster %s says %s %s, reason %s: %s", o.a.name, name, v1alpha1.ClusterConditionReaderKeyReady, cond.Status, cond.Reason, msg)
}

// finishLegacy writes on B, once A has issued it the credential, what planLegacy could
// not plan before the consent was written, and returns the plan with those writes.
func (o *Options) finishLegacy(ctx context.Context, p plan) (plan, error) {
	if len(p.writes) > 1 {
		return p, nil
	}
	a, b := o.a, o.b
	if o.DryRun != cmdutil.DryRunNone {
		_, why := a.legacyCredential(ctx, o.Namespace, b.id, o.now())
		fmt.Fprintf(o.ErrOut, "note: the credential context %s issues context %s in the clear (Secret %s/%s) %s: %s's controller issues it once the consent is written. Then join writes it on %s as the Secret %s/%s, and the Cluster %s; not shown in a dry run\n",
			a.name, b.name, v1alpha1.ReadersNamespace(o.Namespace), v1alpha1.LegacyReaderSecretName(b.id), why, a.name,
			b.name, o.Namespace, a.copies.Secret.Name, a.copies.Cluster.Name)
		return p, nil
	}
	notWritten := []string{resourceName(a.copies.Secret) + " on " + b.name, resourceName(a.copies.Cluster) + " on " + b.name}
	cred, err := o.awaitCredential(ctx)
	if err != nil {
		return p, unfinishedError(err.Error(), o.written, notWritten)
	}
	w, err := o.legacyWrites(ctx, cred)
	if err != nil {
		return p, unfinishedError(err.Error(), o.written, notWritten)
	}
	if err := o.write(ctx, plan{writes: []sideWrites{w}}); err != nil {
		return p, err
	}
	p.writes = append(p.writes, w)
	return p, nil
}
