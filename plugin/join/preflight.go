package join

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	memberplan "github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

// side is one of the two clusters join connects.
type side struct {
	// name is the kubeconfig context, as messages show it.
	name string
	// flags select this side on the command line ("--context a"), for hints.
	flags string
	// serverFlag is the flag that overrides the address this side advertises.
	serverFlag string
	// advertise is that flag's value (normalised), or "".
	advertise string

	host      string
	client    client.Client
	clientset kubernetes.Interface

	// Learnt by the preflight.
	id       types.UID
	clusters []v1alpha1.Cluster
	local    *v1alpha1.Cluster
	secret   *corev1.Secret
	// rejoin is the local Cluster as join marks it (marks), when the other side left the
	// group as this side records it, or this side recorded its own departure: the
	// admission of the other side recorded, this side's records of its own departure
	// dropped.
	rejoin *v1alpha1.Cluster
	marks  map[string]*string
	// admits is the other side's name when this side admits it back.
	admits string
	copies copies
}

// newSide builds the clients of side t of factory f.
func (o *Options) newSide(f kube.Factory, t kube.Target, name, flags, serverFlag, advertise string) (*side, error) {
	opts := o.clientOptions()
	cl, err := f.Client(t, opts)
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", name, err)
	}
	cs, err := f.Kubernetes(t, opts)
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", name, err)
	}
	return &side{name: name, flags: flags, serverFlag: serverFlag, advertise: advertise, host: t.Config.Host, client: cl, clientset: cs}, nil
}

// item is one object to write on a side.
type item struct {
	desired  client.Object
	existing client.Object // nil when the object does not exist
	outcome  string        // created, configured or unchanged, as predicted
}

// sideWrites are the objects written on one side, copied from the other.
type sideWrites struct {
	on, from *side
	items    []item
}

// plan is what the preflight found: the writes per side, in order.
type plan struct {
	// rejoin are the sides that left the group and are marked as joined again first.
	rejoin []*side
	writes []sideWrites
}

// waits returns what --wait waits for: on each written side, the Cluster of the other.
func (p plan) waits() []waitTarget {
	var ws []waitTarget
	for _, w := range p.writes {
		ws = append(ws, waitTarget{on: w.on, cluster: w.from.copies.Cluster.Name, synced: len(p.writes) > 1})
	}
	return ws
}

// preflight checks everything that can be checked before writing, and returns the plan.
// Nothing is written.
func (o *Options) preflight(ctx context.Context) (plan, error) {
	if err := o.checkSides(ctx); err != nil {
		return plan{}, err
	}
	if err := o.checkControllers(ctx); err != nil {
		return plan{}, err
	}
	rejoin := o.markRejoins()
	sources := []*side{o.a}
	if !o.OneWay {
		sources = append(sources, o.b)
	}
	if err := o.prepareSources(ctx, sources); err != nil {
		return plan{}, err
	}
	if o.Legacy {
		return o.planLegacy(ctx, rejoin)
	}
	p := plan{rejoin: rejoin}
	for _, from := range sources {
		to := o.other(from)
		items, err := to.checkTarget(ctx, from, o.Namespace)
		if err == nil {
			err = staleConsent(to, from, items)
		}
		if err != nil {
			return plan{}, err
		}
		p.writes = append(p.writes, sideWrites{on: to, from: from, items: items})
	}
	return p, nil
}

// checkSides checks that both sides are reachable, have the registry installed, are two
// different clusters, and each has its own Cluster.
func (o *Options) checkSides(ctx context.Context) error {
	a, b := o.a, o.b
	for _, s := range []*side{a, b} {
		if err := s.reach(ctx); err != nil {
			return err
		}
	}
	for _, s := range []*side{a, b} {
		if err := s.installed(ctx, o.Namespace); err != nil {
			return err
		}
	}
	if a.id == b.id {
		return fmt.Errorf("context %s and context %s are the same cluster (kube-system UID %s): join needs two different clusters", a.name, b.name, a.id)
	}
	for _, s := range []*side{a, b} {
		if err := s.findLocal(); err != nil {
			return err
		}
	}
	return nil
}

// markRejoins sets on a copy of each side's own Cluster the annotations rejoinMarks
// returns for it (s.marks, s.rejoin, and s.local the copy), and returns the sides it
// marked.
//
// A side that left the group, as the other side records it, is admitted back by
// the other side: the admission is recorded on the other side's own Cluster (never
// by the cluster that left, which cannot bring itself back) and cancels every
// earlier record of the departure. A side that recorded its own departure drops
// that record (its admin runs this join). Otherwise the controllers would delete
// the copies.
func (o *Options) markRejoins() []*side {
	var rejoin []*side
	for _, s := range []*side{o.a, o.b} {
		if marks := rejoinMarks(s, o.other(s), o.now()); len(marks) > 0 {
			rejoin = append(rejoin, s)
			s.marks = marks
			marked := s.local.DeepCopy()
			for k, v := range marks {
				if v == nil {
					delete(marked.Annotations, k)
					continue
				}
				if marked.Annotations == nil {
					marked.Annotations = map[string]string{}
				}
				marked.Annotations[k] = *v
			}
			s.rejoin = marked
			s.local = marked
		}
	}
	return rejoin
}

// prepareSources reads the reader Secret of every side whose credentials join copies
// to the other (sources), builds the copies, and checks the address each advertises and
// that its token reads it from the other side.
func (o *Options) prepareSources(ctx context.Context, sources []*side) error {
	for _, s := range sources {
		if s.secret == nil { // read by checkControllers, unless it failed there
			if err := s.readSecret(ctx, o.Namespace); err != nil {
				return err
			}
		}
		if err := s.buildCopies(o.Namespace); err != nil {
			return err
		}
		if own := s.ownServer(); s.advertise != "" && own != s.advertise {
			// The other side's membership sync keeps the chosen address (the Cluster copy
			// carries v1alpha1.PinnedServerAnnotation) until a join without it.
			fmt.Fprintf(o.ErrOut, "note: context %s advertises its API server at %s itself; %s reaches it at %s, pinned there (annotation %s on its Cluster of %s) until a join without %s\n",
				s.name, own, o.other(s).name, s.advertise, v1alpha1.PinnedServerAnnotation, s.name, s.serverFlag)
		}
	}
	for _, s := range sources {
		if err := s.checkAdvertised(o.AllowLoopback, o.other(s)); err != nil {
			return err
		}
	}
	for _, s := range sources {
		if err := s.checkToken(ctx, o.other(s), o.Factory, o.clientOptions()); err != nil {
			return err
		}
	}
	return nil
}

// rejoinMarks returns the annotations join changes on side s's own Cluster (nil value:
// removed) so that s and other form a group again: the admission of other when s
// records other's departure, and s's records of its own departure dropped.
func rejoinMarks(s, other *side, now time.Time) map[string]*string {
	marks := map[string]*string{}
	deps, admitted, _ := memberplan.Records(s.local)
	if _, left := deps[other.id]; left {
		admitted.Add(other.id, now)
		v := admitted.Format()
		marks[v1alpha1.AdmittedClustersAnnotation] = &v
		s.admits = other.name
	}
	if _, self := deps[s.id]; self {
		for _, k := range []string{v1alpha1.LeftClustersAnnotation, v1alpha1.ConfirmedDeparturesAnnotation} {
			d, _ := memberplan.ParseDepartures(s.local.Annotations[k])
			if _, ok := d[s.id]; !ok {
				continue
			}
			delete(d, s.id)
			v := d.Format()
			if v == "" {
				marks[k] = nil
			} else {
				marks[k] = &v
			}
		}
	}
	if _, ok := s.local.Annotations[v1alpha1.JoinedAtAnnotation]; ok && len(marks) > 0 {
		marks[v1alpha1.JoinedAtAnnotation] = nil
	}
	return marks
}

func (o *Options) other(s *side) *side {
	if s == o.a {
		return o.b
	}
	return o.a
}

// reach reads the kube-system namespace: the API server answers, and its UID is the
// cluster's ID.
func (s *side) reach(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	ns, err := s.clientset.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			return fmt.Errorf("context %s: the API server at %s refuses to show the kube-system namespace to you: %w", s.name, s.host, err)
		}
		return fmt.Errorf("cannot reach the API server of context %s at %s: %w", s.name, s.host, err)
	}
	if ns.UID == "" {
		return fmt.Errorf("context %s: the kube-system namespace has no UID", s.name)
	}
	if len(ns.UID) > maxUIDLen {
		return fmt.Errorf("context %s: the UID of the kube-system namespace is %d bytes long, not a UID", s.name, len(ns.UID))
	}
	s.id = ns.UID
	return nil
}

// installed checks the registry's CRD and namespace.
func (s *side) installed(ctx context.Context, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var list v1alpha1.ClusterList
	if err := s.client.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return fmt.Errorf("the registry is not installed on context %s: the CRD clusters.%s is missing; run: kubectl registry install %s",
				s.name, v1alpha1.GroupVersion.Group, s.flags)
		}
		return fmt.Errorf("context %s: listing Clusters: %w", s.name, err)
	}
	s.clusters = list.Items
	var ns corev1.Namespace
	if err := s.client.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the registry is not installed on context %s: the namespace %s is missing; run: kubectl registry install %s (or pass --namespace if the registry lives in another namespace)",
				s.name, namespace, s.flags)
		}
		return fmt.Errorf("context %s: reading the namespace %s: %w", s.name, namespace, err)
	}
	return nil
}

// findLocal finds, among the Clusters listed by installed, the Cluster CR of the cluster
// itself: its clusterID is the kube-system UID.
func (s *side) findLocal() error {
	var locals []*v1alpha1.Cluster
	for i := range s.clusters {
		if s.clusters[i].Spec.ClusterID == s.id {
			locals = append(locals, &s.clusters[i])
		}
	}
	switch len(locals) {
	case 0:
		return fmt.Errorf("context %s has no local Cluster (none has clusterID %s, the UID of its kube-system namespace): the controller has not bootstrapped it yet. Is \"kubectl registry serve\" running there? (kubectl registry install %s deploys it)",
			s.name, s.id, s.flags)
	case 1:
		s.local = locals[0]
		return nil
	}
	names := make([]string, len(locals))
	for i, c := range locals {
		names[i] = c.Name
	}
	sort.Strings(names)
	return fmt.Errorf("context %s has several Clusters claiming to be the local cluster (clusterID %s): %s; delete all but one first",
		s.name, s.id, strings.Join(names, ", "))
}

// readSecret reads and checks the reader Secret the local Cluster references.
func (s *side) readSecret(ctx context.Context, namespace string) error {
	if err := s.checkNames(); err != nil {
		return err
	}
	ref := s.local.Spec.AuthInfo.SecretRef
	if ref.Name == "" {
		return fmt.Errorf("the local Cluster %s on context %s has no spec.authInfo.secretRef: the controller has not bootstrapped it yet. Is \"kubectl registry serve\" running there?", s.local.Name, s.name)
	}
	if ref.Namespace != "" && ref.Namespace != namespace {
		return fmt.Errorf("the local Cluster %s on context %s references the Secret %s/%s, outside the registry namespace %s: pass --namespace %s if the registry lives there",
			s.local.Name, s.name, ref.Namespace, ref.Name, namespace, ref.Namespace)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	var secret corev1.Secret
	if err := s.client.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the reader Secret %s of the local Cluster %s is missing on context %s: the controller has not bootstrapped it yet. Is \"kubectl registry serve\" running there?", key, s.local.Name, s.name)
		}
		return fmt.Errorf("context %s: reading the reader Secret %s: %w", s.name, key, err)
	}
	switch {
	case secret.Type != v1alpha1.SecretTypeClusterRegistry:
		return fmt.Errorf("the reader Secret %s on context %s has type %q, want %q", key, s.name, secret.Type, v1alpha1.SecretTypeClusterRegistry)
	case len(secret.Data[v1alpha1.KubeconfigKey]) == 0:
		return fmt.Errorf("the reader Secret %s on context %s has no %q key", key, s.name, v1alpha1.KubeconfigKey)
	}
	if _, err := kubeconfig.Parse(secret.Data[v1alpha1.KubeconfigKey]); err != nil {
		return fmt.Errorf("the reader Secret %s on context %s: %w", key, s.name, err)
	}
	s.secret = &secret
	return nil
}

// buildCopies builds the objects written on the other side.
func (s *side) buildCopies(namespace string) error {
	c, err := buildCopies(s.local, s.secret, namespace, s.advertise)
	if err != nil {
		return fmt.Errorf("the reader Secret %s/%s on context %s: %w", namespace, s.secret.Name, s.name, err)
	}
	if _, err := kubeconfig.Parse(c.Secret.Data[v1alpha1.KubeconfigKey]); err != nil {
		return fmt.Errorf("the reader kubeconfig of context %s with %s %s: %w", s.name, s.serverFlag, s.advertise, err)
	}
	s.copies = c
	return nil
}

// ownServer is the server of this side's own reader kubeconfig.
func (s *side) ownServer() string {
	cfg, err := kubeconfig.Parse(s.secret.Data[v1alpha1.KubeconfigKey])
	if err != nil {
		return ""
	}
	return cfg.Host
}

// advertisedServer is the server of the copied reader kubeconfig: where the other side's
// controller will read this side.
func (s *side) advertisedServer() string {
	cfg, err := kubeconfig.Parse(s.copies.Secret.Data[v1alpha1.KubeconfigKey])
	if err != nil {
		return ""
	}
	return cfg.Host
}

// checkAdvertised refuses a loopback address unless allowed: it means the other
// cluster's own machine.
func (s *side) checkAdvertised(allowLoopback bool, other *side) error {
	server := s.advertisedServer()
	if allowLoopback || !kubeconfig.IsLoopback(server) {
		return nil
	}
	return fmt.Errorf("context %s advertises its API server at %s, a loopback address: the controller of %s cannot reach it there. Pass %s <address %s reaches %s at> (or run the controller of %s with --api-server-endpoint), or --allow-loopback if every cluster runs on this machine",
		s.name, server, other.name, s.serverFlag, other.name, s.name, s.name)
}

// checkToken uses the copied reader kubeconfig from this machine, as the other side's
// controller will: the token must be accepted and the server must be this cluster.
func (s *side) checkToken(ctx context.Context, other *side, f kube.Factory, opts kube.ClientOptions) error {
	cfg, err := kubeconfig.Parse(s.copies.Secret.Data[v1alpha1.KubeconfigKey])
	if err != nil {
		return fmt.Errorf("the reader kubeconfig of context %s: %w", s.name, err)
	}
	cs, err := f.Kubernetes(kube.Target{Name: cfg.Host, Config: cfg}, opts)
	if err != nil {
		return fmt.Errorf("the reader kubeconfig of context %s: %w", s.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	server := cfg.Host
	hint := fmt.Sprintf("if %s reaches %s at another address, pass %s <that address>", other.name, s.name, s.serverFlag)
	switch {
	case err == nil && ns.UID != s.id:
		return fmt.Errorf("the reader kubeconfig of context %s points at %s, which is another cluster (kube-system UID %s, not %s): %s",
			s.name, server, ns.UID, s.id, hint)
	case err == nil:
		return nil
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the reader token of context %s is rejected by %s: either the token expired or was revoked (the controller of %s renews it: check that \"kubectl registry serve\" runs there, or delete the Secret %s/%s there to get a new one), or %s is not the API server of %s (%s)",
			s.name, server, s.name, s.secret.Namespace, s.secret.Name, server, s.name, hint)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the reader of context %s may not read the kube-system namespace at %s: the reader's RBAC is missing; run: kubectl registry install %s",
			s.name, server, s.flags)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return fmt.Errorf("checking the reader kubeconfig of context %s against %s: %w", s.name, server, err)
	}
	var verr *tls.CertificateVerificationError
	var herr x509.HostnameError
	if errors.As(err, &verr) || errors.As(err, &herr) {
		return fmt.Errorf("the API server at %s (from the reader kubeconfig of context %s) fails TLS verification with that kubeconfig's CA: %w. Either it is not the API server of %s, or its certificate does not cover that address; %s",
			server, s.name, err, s.name, hint)
	}
	return fmt.Errorf("this machine cannot reach %s, where context %s advertises its API server to %s: %w; %s",
		server, s.name, other.name, err, hint)
}

// checkTarget checks that from's copies can be written on s, and predicts the outcome.
func (s *side) checkTarget(ctx context.Context, from *side, namespace string) ([]item, error) {
	want := from.copies
	for _, c := range s.clusters {
		switch {
		case c.Name == want.Cluster.Name && c.Spec.ClusterID == s.id:
			return nil, fmt.Errorf("context %s and context %s are both named %s in the registry (the local Clusters): clusters of a group need different names", s.name, from.name, c.Name)
		case c.Name == want.Cluster.Name && c.Spec.ClusterID != from.id:
			return nil, fmt.Errorf("name clash on context %s: its Cluster %s describes another cluster (clusterID %s), not %s (clusterID %s); rename or delete it there first",
				s.name, c.Name, c.Spec.ClusterID, from.name, from.id)
		case c.Name != want.Cluster.Name && c.Spec.ClusterID == from.id:
			return nil, fmt.Errorf("context %s already knows context %s (clusterID %s) as Cluster %s, not %s: delete that Cluster there first",
				s.name, from.name, from.id, c.Name, want.Cluster.Name)
		case c.Name != want.Cluster.Name && refersTo(c, namespace, want.Secret.Name):
			return nil, fmt.Errorf("name clash on context %s: the Secret %s/%s is the reader Secret of its Cluster %s (clusterID %s), not of %s",
				s.name, namespace, want.Secret.Name, c.Name, c.Spec.ClusterID, from.name)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var items []item
	secret := &corev1.Secret{}
	switch err := s.client.Get(ctx, client.ObjectKeyFromObject(want.Secret), secret); {
	case apierrors.IsNotFound(err):
		items = append(items, item{desired: want.Secret, outcome: "created"})
	case err != nil:
		return nil, fmt.Errorf("context %s: reading the Secret %s/%s: %w", s.name, namespace, want.Secret.Name, err)
	default:
		if mark := secret.Annotations[v1alpha1.OwnershipAnnotation]; mark != "" && mark != string(from.id) {
			return nil, fmt.Errorf("name clash on context %s: the Secret %s/%s is a copy from cluster %s, not %s (clusterID %s)",
				s.name, namespace, secret.Name, mark, from.name, from.id)
		}
		if secret.Type != want.Secret.Type {
			return nil, fmt.Errorf("the Secret %s/%s on context %s has type %q, not %q, and a Secret's type cannot change: delete it there first (kubectl delete secret -n %s %s %s)",
				namespace, secret.Name, s.name, secret.Type, want.Secret.Type, namespace, secret.Name, s.flags)
		}
		outcome := "configured"
		if secretUpToDate(secret, want.Secret) {
			outcome = "unchanged"
		}
		items = append(items, item{desired: want.Secret, existing: secret, outcome: outcome})
	}
	cluster := &v1alpha1.Cluster{}
	switch err := s.client.Get(ctx, client.ObjectKeyFromObject(want.Cluster), cluster); {
	case apierrors.IsNotFound(err):
		items = append(items, item{desired: want.Cluster, outcome: "created"})
	case err != nil:
		return nil, fmt.Errorf("context %s: reading the Cluster %s: %w", s.name, want.Cluster.Name, err)
	default:
		if cluster.Spec.ClusterID != from.id {
			// Created since the list above.
			return nil, fmt.Errorf("name clash on context %s: its Cluster %s describes another cluster (clusterID %s), not %s (clusterID %s)",
				s.name, cluster.Name, cluster.Spec.ClusterID, from.name, from.id)
		}
		outcome := "configured"
		if clusterUpToDate(cluster, want.Cluster) {
			outcome = "unchanged"
		}
		items = append(items, item{desired: want.Cluster, existing: cluster, outcome: outcome})
	}
	return items, nil
}

// refersTo reports whether Cluster c uses the Secret namespace/name of the registry
// namespace as its reader Secret.
func refersTo(c v1alpha1.Cluster, namespace, name string) bool {
	ref := c.Spec.AuthInfo.SecretRef
	return ref.Name == name && (ref.Namespace == "" || ref.Namespace == namespace)
}
