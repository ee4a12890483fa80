package planner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// A member is a stranger: a rule made on any member runs here, and the objects it copies
// come from members' API servers. Every copy is checked here, after mutation and before
// any write, against what this cluster never accepts and against its own SyncPolicies.
// The worst a hostile member can do through rules is offer objects this cluster's policy
// allows.

// MaxCopySize is the largest copy, as JSON, that a rule with overrides may write: well
// below the API server's limit, so a template cannot build a copy that exhausts memory.
const MaxCopySize = 1 << 20

// Refusal says why a copy or a rule is not written here.
type Refusal struct {
	// Reason is v1alpha1.ReasonCopyRefused (never accepted) or ReasonNotAllowed (this
	// cluster's policy does not allow it).
	Reason string
	// Message says what is refused and, for ReasonNotAllowed, the SyncPolicy entry that
	// would allow it.
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Policy is this cluster's consent to what rules may write into it: its SyncPolicies,
// and the registry's own objects, which are never written by rules. The zero Policy is
// the default policy of a cluster with no SyncPolicy and no registry objects known.
type Policy struct {
	specs []v1alpha1.SyncPolicySpec
	// namespace is the registry's namespace; readerSecrets the names of the reader
	// Secrets there (one per Cluster).
	namespace     string
	readerSecrets map[string]bool
	// quarantined are the clusters whose objects no copy is made of, whoever offers
	// them: disabled here, or departed.
	quarantined map[types.UID]bool
	// nsLevels are the namespaces' pod-security.kubernetes.io/enforce labels
	// (WithNamespaceLevels, podsecurity.go).
	nsLevels map[string]string
	// members are the clusters this cluster knows, by ID, with their Cluster's name
	// here: an object's origin must be one of them (or a source of Gather).
	members map[types.UID]string
}

// MemberName returns the name of the Cluster of member id here, and whether id is a
// member this policy knows (PolicyOf: a Cluster of this cluster has that clusterID).
func (p Policy) MemberName(id types.UID) (string, bool) {
	n, ok := p.members[id]
	return n, ok && id != ""
}

// Quarantine returns p with the objects of clusters ids refused as sources, whichever
// member offers them (a disabled or departed member's objects would otherwise still
// arrive through the members that read it).
func (p Policy) Quarantine(ids ...types.UID) Policy {
	q := make(map[types.UID]bool, len(p.quarantined)+len(ids))
	for id := range p.quarantined {
		q[id] = true
	}
	for _, id := range ids {
		if id != "" {
			q[id] = true
		}
	}
	p.quarantined = q
	return p
}

// Quarantined reports whether objects whose origin is id are refused as sources.
func (p Policy) Quarantined(id types.UID) bool {
	return p.quarantined[id]
}

// NewPolicy returns the policy of a cluster with the given SyncPolicies, registry
// namespace and Cluster names (whose reader Secrets are the registry's).
func NewPolicy(specs []v1alpha1.SyncPolicySpec, registryNamespace string, clusterNames []string) Policy {
	p := Policy{specs: specs, namespace: registryNamespace, readerSecrets: map[string]bool{}}
	for _, n := range clusterNames {
		p.readerSecrets[n] = true
	}
	return p
}

// PolicyOf returns the policy of a cluster from its SyncPolicies and its Clusters (whose
// names and reader Secrets, in the registry namespace, are the registry's; the disabled
// ones, and the departures the cluster's own Cluster (clusterID localID) records, are
// quarantined; their IDs are the members an origin must be one of): what the controller
// and sync-diff both read.
func PolicyOf(policies []v1alpha1.SyncPolicy, clusters []v1alpha1.Cluster, registryNamespace string, localID types.UID) Policy {
	specs := make([]v1alpha1.SyncPolicySpec, 0, len(policies))
	for _, p := range policies {
		specs = append(specs, p.Spec)
	}
	names := make([]string, 0, 2*len(clusters))
	for _, c := range clusters {
		names = append(names, c.Name)
		if ref := c.Spec.AuthInfo.SecretRef; ref.Name != "" {
			names = append(names, ref.Name)
		}
	}
	var quarantined []types.UID
	known := make(map[types.UID]string, len(clusters))
	for _, c := range clusters {
		if c.Spec.ClusterID != "" {
			known[c.Spec.ClusterID] = c.Name
		}
		if c.Disabled() && c.Spec.ClusterID != localID {
			quarantined = append(quarantined, c.Spec.ClusterID)
		}
		if c.Spec.ClusterID == localID && localID != "" {
			// Kept by the membership sync: the departures in force.
			gone, _ := members.ParseDepartures(c.Annotations[v1alpha1.LeftClustersAnnotation])
			for _, id := range slices.Sorted(maps.Keys(gone)) {
				if id != localID {
					quarantined = append(quarantined, id)
				}
			}
		}
	}
	p := NewPolicy(specs, registryNamespace, names).Quarantine(quarantined...)
	p.members = known
	return p
}

// systemNamespace reports whether ns is one of the cluster's own namespaces, where rules
// write only when a SyncPolicy lists the namespace.
func systemNamespace(ns string) bool {
	return ns == "kube-system" || ns == "kube-public" || ns == "kube-node-lease"
}

// PowerKind reports whether copies of kind gk grant power in the cluster (who may do
// what, what the API server admits or serves): refused unless a SyncPolicy allows them.
func PowerKind(gk schema.GroupKind) bool {
	switch gk.Group {
	case "rbac.authorization.k8s.io", "admissionregistration.k8s.io", "apiregistration.k8s.io", "apiextensions.k8s.io":
		return true
	case "certificates.k8s.io":
		return gk.Kind == "CertificateSigningRequest" || gk.Kind == "ClusterTrustBundle"
	}
	return false
}

// refusedSecretTypes are Secret types that bear credentials the cluster issues itself.
func refusedSecretType(t string) bool {
	switch corev1.SecretType(t) {
	case corev1.SecretTypeServiceAccountToken, corev1.SecretTypeBootstrapToken, v1alpha1.SecretTypeClusterRegistry:
		return true
	}
	return false
}

// registryOwned reports whether rules may never sync kind gk: the registry's Clusters
// (membership) and SyncPolicies (each cluster's own consent). ResourceSyncRules travel by
// the built-in rule; ClusterFeatures may be synced, as the seed's users do.
func registryOwned(gk schema.GroupKind) bool {
	return gk.Group == v1alpha1.GroupVersion.Group && (gk.Kind == "Cluster" || gk.Kind == "SyncPolicy")
}

// RuleAllowed checks what a rule asks for as a whole: the registry's Clusters and
// SyncPolicies are never synced by rules, and the policy may refuse its kinds, its
// overrides or its rewrites. It returns nil when the rule may run here.
func (p Policy) RuleAllowed(rsr *v1alpha1.ResourceSyncRule, compiled *rules.Rule) *Refusal {
	if rsr.Name == v1alpha1.CoreRuleName {
		return nil
	}
	if rsr.Labels[v1alpha1.SeedCoreSyncLabel] == "true" {
		// The seed's controller syncs Clusters, reader Secrets and rules with these from
		// the members carrying its core ClusterFeature; the membership here is this
		// controller's, and the built-in rule copies the rules.
		return &Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: fmt.Sprintf("a rule of the seed's controller's own membership (label %s): this controller keeps the membership itself and never runs it", v1alpha1.SeedCoreSyncLabel)}
	}
	for _, gvk := range append([]schema.GroupVersionKind{compiled.GVK}, compiled.TargetGVKs...) {
		if registryOwned(gvk.GroupKind()) {
			return &Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: fmt.Sprintf("%s is the registry's own kind: rules never sync it", gvk.Kind)}
		}
		if gvk.GroupKind() == (schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: "ResourceSyncRule"}) {
			// Only the built-in rule copies rules, unchanged: a rule copied by another rule
			// (renamed, with overrides) would carry its source's origin, and rank as a
			// rule made there (RuleRank).
			return &Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: "ResourceSyncRules travel only by the built-in rule, unchanged: no other rule syncs them"}
		}
	}
	for _, s := range p.specs {
		if s.DenyOverrides && hasOverrides(rsr) {
			return &Refusal{Reason: v1alpha1.ReasonNotAllowed, Message: "this cluster's SyncPolicy sets denyOverrides: a rule with overrides needs a policy without it"}
		}
		if s.DenyRewrites && hasRewrites(rsr) {
			return &Refusal{Reason: v1alpha1.ReasonNotAllowed, Message: "this cluster's SyncPolicy sets denyRewrites: a rule with name or namespace rewrites needs a policy without it"}
		}
	}
	for _, gvk := range compiled.TargetGVKs {
		if PowerKind(gvk.GroupKind()) && !p.allowsKind(gvk.GroupKind()) {
			return &Refusal{Reason: v1alpha1.ReasonNotAllowed, Message: fmt.Sprintf(
				"%s grants power in the cluster: it needs a SyncPolicy entry: spec.allow: [{kinds: [{group: %s, kind: %s}]}]", gvk.Kind, gvk.Group, gvk.Kind)}
		}
	}
	return nil
}

func hasOverrides(rsr *v1alpha1.ResourceSyncRule) bool {
	for _, r := range rsr.Spec.Rules {
		if len(r.Mutations.Overrides) > 0 {
			return true
		}
	}
	return false
}

func hasRewrites(rsr *v1alpha1.ResourceSyncRule) bool {
	for _, r := range rsr.Spec.Rules {
		if r.Mutations.Name != nil || r.Mutations.Namespace != nil {
			return true
		}
	}
	return false
}

func (p Policy) allowsKind(gk schema.GroupKind) bool {
	for _, s := range p.specs {
		for _, a := range s.Allow {
			if listsKind(a, gk) {
				return true
			}
		}
	}
	return false
}

func listsKind(a v1alpha1.PolicyAllow, gk schema.GroupKind) bool {
	for _, k := range a.Kinds {
		if k.Group == gk.Group && k.Kind == gk.Kind {
			return true
		}
	}
	return false
}

// CheckCopy checks one copy, after mutation, of source read from the origin cluster
// named origin (its Cluster's name here). It returns nil when the copy may be written.
// A copy is never written when it changes a Secret's type or a top-level type, bears
// credentials the cluster issues (service account and bootstrap tokens, reader
// kubeconfigs), is one of the registry's objects, or is larger than MaxCopySize
// (checkSize, for rules whose templates build content); kinds that grant power, the
// system namespaces and origins outside the policy need a SyncPolicy entry.
func (p Policy) CheckCopy(source, copy *unstructured.Unstructured, origin string, checkSize bool) *Refusal {
	gvk := copy.GroupVersionKind()
	ns, name := copy.GetNamespace(), copy.GetName()
	what := fmt.Sprintf("%s %s", gvk.Kind, joinKey(ns, name))
	refuse := func(format string, args ...any) *Refusal {
		return &Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: what + ": " + fmt.Sprintf(format, args...)}
	}
	srcType, _, _ := unstructured.NestedFieldNoCopy(source.Object, "type")
	cpType, _, _ := unstructured.NestedFieldNoCopy(copy.Object, "type")
	if fmt.Sprint(srcType) != fmt.Sprint(cpType) {
		return refuse("the rule changes its type (%v to %v)", srcType, cpType)
	}
	if gvk.Group == "" && gvk.Kind == "Secret" {
		if t, _ := cpType.(string); refusedSecretType(t) {
			return refuse("a Secret of type %s bears credentials this cluster issues itself: never copied", t)
		}
	}
	if registryOwned(gvk.GroupKind()) {
		return refuse("the registry's own objects are never written by rules")
	}
	if gvk.Group == v1alpha1.GroupVersion.Group && gvk.Kind == "ResourceSyncRule" && name == v1alpha1.CoreRuleName {
		return refuse("%s is the built-in rule's reserved name: a rule of that name never runs, and is not copied", name)
	}
	if p.namespace != "" && ns == p.namespace {
		switch {
		case gvk.Group == "" && gvk.Kind == "ServiceAccount",
			gvk.Group == "coordination.k8s.io" && gvk.Kind == "Lease",
			gvk.Group == "" && gvk.Kind == "Secret" && p.readerSecrets[name]:
			return refuse("the registry's own objects are never written by rules")
		}
	}
	if checkSize {
		if b, err := json.Marshal(copy.Object); err != nil || len(b) > MaxCopySize {
			return refuse("the copy is larger than %d bytes", MaxCopySize)
		}
	}
	gk := gvk.GroupKind()
	for _, s := range p.specs {
		if len(s.FromClusters) > 0 && !slices.Contains(s.FromClusters, origin) {
			return &Refusal{Reason: v1alpha1.ReasonNotAllowed, Message: fmt.Sprintf(
				"%s: its origin %s is not in this cluster's SyncPolicy spec.fromClusters", what, origin)}
		}
	}
	// The registry's namespaces, and pod templates judged by the Pod Security Standards
	// (podsecurity.go).
	if ref := p.checkRegistryNamespaces(gk, copy, what); ref != nil {
		return ref
	}
	if ref := p.checkPodSecurity(gk, copy, what); ref != nil {
		return ref
	}
	power, system := PowerKind(gk), systemNamespace(ns)
	if !power && !system {
		return nil
	}
	for _, s := range p.specs {
		for _, a := range s.Allow {
			if power && !listsKind(a, gk) || !power && len(a.Kinds) > 0 && !listsKind(a, gk) {
				continue
			}
			if system && !slices.Contains(a.Namespaces, ns) || !system && len(a.Namespaces) > 0 && ns != "" && !slices.Contains(a.Namespaces, ns) {
				continue
			}
			if len(a.FromClusters) > 0 && !slices.Contains(a.FromClusters, origin) {
				continue
			}
			return nil
		}
	}
	var need []string
	if power {
		need = append(need, fmt.Sprintf("kinds: [{group: %s, kind: %s}]", gk.Group, gk.Kind))
	}
	if system || (power && ns != "") {
		need = append(need, fmt.Sprintf("namespaces: [%s]", ns))
	}
	return &Refusal{Reason: v1alpha1.ReasonNotAllowed, Message: fmt.Sprintf(
		"%s from %s needs a SyncPolicy entry: spec.allow: [{%s}]", what, origin, strings.Join(need, ", "))}
}

func joinKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
