package members

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Reader is a peer that should have a reader identity.
type Reader struct {
	ID   types.UID
	Name string
	// PublicKey is the key the peer advertises on its own Cluster
	// (v1alpha1.ReaderPublicKeyAnnotation, as read from the peer: see PeerKeys), which
	// its credential is sealed to; empty when it advertises none (it is issued nothing).
	PublicKey string
	// Legacy is set when this cluster's admin named the peer a legacy member
	// (v1alpha1.LegacyPeerAnnotation on its Cluster here): it is issued a credential in
	// the clear as well (see LegacyTokenDue).
	Legacy bool
}

// ReadersInput is what PlanReaders decides from.
type ReadersInput struct {
	// LocalID is the local cluster's ID.
	LocalID types.UID
	// Clusters are the local Cluster CRs.
	Clusters []v1alpha1.Cluster
	// Departed are the clusters whose departure is in force (the local one included, if
	// it left).
	Departed map[types.UID]bool
	// ServiceAccounts are the per-peer reader ServiceAccounts (labelled v1alpha1.ReaderForLabel).
	ServiceAccounts []corev1.ServiceAccount
}

// Readers is what PlanReaders decides.
type Readers struct {
	// Create are the peers that get a reader ServiceAccount.
	Create []Reader
	// Keep are the peers whose ServiceAccount exists and stays.
	Keep []Reader
	// Revoke are the ServiceAccounts to delete: of clusters that left and that no local
	// Cluster CR describes any more (the membership deleted them).
	Revoke []corev1.ServiceAccount
	// RotateShared says the shared reader ServiceAccount is to be recreated first: a
	// departed cluster held copies of its token.
	RotateShared bool
	// Left says the local cluster left the group: the Secrets holding the tokens it
	// issued are deleted (the members deleted their copies), its ServiceAccounts kept.
	Left bool
}

// PlanReaders decides which per-peer reader ServiceAccounts exist. A ServiceAccount is deleted
// only on a positive observation: its peer's departure (or the local cluster's) is in
// force. A peer whose Cluster was deleted by hand keeps it (it may be learnt again). A
// departed peer's ServiceAccount is deleted once no local Cluster CR describes the peer
// (or those left are being deleted): the membership deletes them as it carries the
// departure out, and a member that has revoked a departed cluster's credential has then
// dropped it. Until then it is neither revoked nor renewed.
func PlanReaders(in ReadersInput) Readers {
	var res Readers
	if in.Departed[in.LocalID] {
		// The local cluster left: it issues and renews nothing, and revokes nothing
		// either, so that the members (and "leave --wait") still see it forget the
		// group; it deletes the Secrets of the tokens it issued, which expire with their
		// lifetime.
		res.Left = true
		return res
	}
	// described are the clusters a local Cluster CR still describes, not being deleted.
	described := map[types.UID]bool{}
	for _, c := range in.Clusters {
		if c.DeletionTimestamp == nil {
			described[c.Spec.ClusterID] = true
		}
	}
	byKey := map[string]corev1.ServiceAccount{}
	sas := append([]corev1.ServiceAccount(nil), in.ServiceAccounts...)
	sort.Slice(sas, func(i, j int) bool { return sas[i].Name < sas[j].Name })
	for _, sa := range sas {
		if id := types.UID(sa.Annotations[v1alpha1.PeerClusterIDAnnotation]); id != "" && in.Departed[id] {
			if !described[id] {
				res.Revoke = append(res.Revoke, sa)
			}
			continue
		}
		byKey[sa.Labels[v1alpha1.ReaderForLabel]] = sa
	}
	res.RotateShared = len(res.Revoke) > 0
	clusters := append([]v1alpha1.Cluster(nil), in.Clusters...)
	sort.Slice(clusters, func(i, j int) bool { return clusters[i].Name < clusters[j].Name })
	seen := map[types.UID]bool{}
	for _, c := range clusters {
		id := c.Spec.ClusterID
		if id == "" || id == in.LocalID || in.Departed[id] || seen[id] {
			continue
		}
		seen[id] = true
		p := Reader{ID: id, Name: c.Name, Legacy: v1alpha1.IsLegacyPeer(&c)}
		if _, ok := byKey[v1alpha1.ReaderKey(id)]; ok {
			res.Keep = append(res.Keep, p)
		} else {
			res.Create = append(res.Create, p)
		}
	}
	return res
}

// TokenDue reports whether the token in the issued Secret s (nil when missing) must be
// issued again: it is missing or not ours, it was issued for another ServiceAccount (the
// ServiceAccount was recreated), it is due for renewal, or it is not sealed to the key
// whose fingerprint (seal.Fingerprint) is sealedTo (the peer's current key). (It is not
// checked for its server: the peer uses its token with the server and CA it pinned.)
func TokenDue(s *corev1.Secret, saUID types.UID, sealedTo string, now time.Time) bool {
	if !currentCredential(s, saUID, now) {
		return true
	}
	return s.Annotations[v1alpha1.SealedToAnnotation] != sealedTo ||
		len(s.Data[v1alpha1.SealedKubeconfigKey]) == 0 || len(s.Data[v1alpha1.KubeconfigKey]) != 0
}

// LegacyTokenDue reports whether the credential in the clear issued to a legacy peer, in
// the Secret s of the readers namespace (nil when missing), must be issued again: it is
// missing or not ours, it was issued for another ServiceAccount (the ServiceAccount was
// recreated), it is due for renewal, or it holds no kubeconfig in the clear.
func LegacyTokenDue(s *corev1.Secret, saUID types.UID, now time.Time) bool {
	return !currentCredential(s, saUID, now) || len(s.Data[v1alpha1.KubeconfigKey]) == 0
}

// currentCredential reports whether s (nil when missing) is an issued credential of this cluster's
// (not a copy) for the ServiceAccount of UID saUID, not yet due for renewal at now.
func currentCredential(s *corev1.Secret, saUID types.UID, now time.Time) bool {
	if s == nil || s.Type != v1alpha1.SecretTypeClusterRegistry || s.Annotations[v1alpha1.OwnershipAnnotation] != "" ||
		s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] != string(saUID) {
		return false
	}
	renewAt, err := time.Parse(time.RFC3339, s.Annotations[v1alpha1.TokenRenewAfterAnnotation])
	return err == nil && now.Before(renewAt)
}

// LegacySubjects are the subjects of the ClusterRoleBinding v1alpha1.LegacyReaderRoleName:
// the reader ServiceAccounts (of namespace readers) of the legacy peers, sorted.
func LegacySubjects(readers string, peers []Reader) []rbacv1.Subject {
	var out []rbacv1.Subject
	seen := map[string]bool{}
	for _, p := range peers {
		name := v1alpha1.ReaderServiceAccountName(p.ID)
		if !p.Legacy || p.ID == "" || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: readers, Name: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// BootstrapRules are the rules of the Role v1alpha1.BootstrapRoleName: get, list and
// watch (by name: a list or watch must select metadata.name) of the Secrets holding the
// credentials issued to peers, sorted; none when there are no peers (a rule without
// resourceNames would grant every Secret of the namespace).
func BootstrapRules(peers []Reader) []rbacv1.PolicyRule {
	names := make([]string, 0, len(peers))
	seen := map[string]bool{}
	for _, p := range peers {
		if n := v1alpha1.IssuedReaderSecretName(p.ID); p.ID != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return []rbacv1.PolicyRule{{
		APIGroups:     []string{""},
		Resources:     []string{"secrets"},
		Verbs:         []string{"get", "list", "watch"},
		ResourceNames: names,
	}}
}
