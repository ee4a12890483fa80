package members

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Notice is what a member seals to a peer, besides its reader kubeconfig, so that the peer
// can read its departure notice once every other credential it held is revoked (see
// v1alpha1.NoticeName): a token of the notice ServiceAccount and the notice's name.
type Notice struct {
	Token string `json:"token"`
	Name  string `json:"name"`
}

// Marshal returns the JSON sealed under v1alpha1.SealedNoticeKey.
func (n Notice) Marshal() ([]byte, error) { return json.Marshal(n) }

// ParseNotice reads an opened v1alpha1.SealedNoticeKey.
func ParseNotice(data []byte) (Notice, error) {
	var n Notice
	if err := json.Unmarshal(data, &n); err != nil {
		return Notice{}, fmt.Errorf("reading the departure notice credential: %w", err)
	}
	if n.Token == "" || !validNoticeName(n.Name) {
		return Notice{}, errors.New("reading the departure notice credential: no token or no valid notice name")
	}
	return n, nil
}

// noticeNameBytes is how many random bytes a notice's name holds: not guessable.
const noticeNameBytes = 16

// NewNoticeName returns a random departure notice name.
func NewNoticeName() (string, error) {
	b := make([]byte, noticeNameBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("choosing a departure notice name: %w", err)
	}
	return v1alpha1.DepartureNoticePrefix + hex.EncodeToString(b), nil
}

func validNoticeName(name string) bool {
	h, ok := strings.CutPrefix(name, v1alpha1.DepartureNoticePrefix)
	if !ok || len(h) != 2*noticeNameBytes {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// NoticeRules are the rules of the Role v1alpha1.NoticeName: get, by name, of the
// departure notices names (none: no rule).
func NoticeRules(names []string) []rbacv1.PolicyRule {
	if len(names) == 0 {
		return nil
	}
	names = slices.Sorted(slices.Values(names))
	return []rbacv1.PolicyRule{{
		APIGroups:     []string{""},
		Resources:     []string{"configmaps"},
		Verbs:         []string{"get"},
		ResourceNames: slices.Compact(names),
	}}
}

// NoticeInput is what PlanNotices decides from.
type NoticeInput struct {
	// Records are the departures the local cluster records on its own Cluster (in force
	// or not: its left-clusters and confirmed-departures), by peer ID.
	Records map[types.UID]time.Time
	// ServiceAccounts are the per-peer reader ServiceAccounts, whose
	// v1alpha1.DepartureNoticeAnnotation names each peer's notice.
	ServiceAccounts []corev1.ServiceAccount
	// Notices are the departure notices of the readers namespace (labelled
	// v1alpha1.ReaderForLabel).
	Notices []corev1.ConfigMap
	// Expiries are, by peer ID, when the notice token last issued to the peer expires
	// (the expiry of its issued reader credential, issued with it); none when the peer
	// holds no credential of this cluster now.
	Expiries map[types.UID]time.Time
	Now      time.Time
}

// NoticePlan is what PlanNotices decides.
type NoticePlan struct {
	// Write are the notices to create or update (their Name, labels, annotations and
	// data set; matched to Notices by name).
	Write []corev1.ConfigMap
	// Delete are the notices to delete: the departure is no longer recorded here, or no
	// notice token issued to the peer is valid any more.
	Delete []corev1.ConfigMap
	// Names are the notices the notice token may get: the Role's rule.
	Names []string
	// Next is when a notice expires next (zero: none).
	Next time.Time
}

// PlanNotices decides the departure notices: one for every peer whose departure the
// local cluster records and whose reader ServiceAccount names its notice (it is made
// before the departure is in force, while the ServiceAccount exists), kept after the
// ServiceAccount is revoked until the last notice token issued to the peer expires.
func PlanNotices(in NoticeInput) NoticePlan {
	var p NoticePlan
	names := map[types.UID]string{}
	for _, sa := range in.ServiceAccounts {
		id := types.UID(sa.Annotations[v1alpha1.PeerClusterIDAnnotation])
		if n := sa.Annotations[v1alpha1.DepartureNoticeAnnotation]; id != "" && validNoticeName(n) {
			names[id] = n
		}
	}
	existing := map[types.UID]*corev1.ConfigMap{}
	for i := range in.Notices {
		cm := &in.Notices[i]
		id := types.UID(cm.Annotations[v1alpha1.PeerClusterIDAnnotation])
		_, recorded := in.Records[id]
		until, err := time.Parse(time.RFC3339, cm.Annotations[v1alpha1.NoticeUntilAnnotation])
		expired := err != nil || !in.Now.Before(until)
		if exp, ok := in.Expiries[id]; ok && exp.After(until) {
			expired = false // a newer notice token is out
		}
		switch {
		case id == "" || !recorded || existing[id] != nil || expired || !validNoticeName(cm.Name):
			p.Delete = append(p.Delete, *cm)
		default:
			existing[id] = cm
		}
	}
	for _, id := range slices.Sorted(maps.Keys(in.Records)) {
		cm := existing[id]
		name := names[id]
		if cm != nil {
			name = cm.Name // the ServiceAccount may be gone: the notice stays
		}
		if name == "" {
			continue // no notice name: the peer was never issued a notice token
		}
		until := in.Expiries[id]
		if cm != nil {
			if t, err := time.Parse(time.RFC3339, cm.Annotations[v1alpha1.NoticeUntilAnnotation]); err == nil && t.After(until) {
				until = t
			}
		}
		if until.IsZero() || !in.Now.Before(until) {
			if cm != nil {
				p.Delete = append(p.Delete, *cm)
			}
			continue // no notice token is valid: nobody can read it
		}
		desired := corev1.ConfigMap{}
		desired.Name = name
		desired.Labels = map[string]string{"app.kubernetes.io/part-of": "kubectl-registry", v1alpha1.ReaderForLabel: v1alpha1.ReaderKey(id)}
		desired.Annotations = map[string]string{
			v1alpha1.PeerClusterIDAnnotation: string(id),
			v1alpha1.NoticeUntilAnnotation:   until.UTC().Format(time.RFC3339),
		}
		desired.Data = map[string]string{v1alpha1.DepartureKey: string(id) + "@" + in.Records[id].UTC().Format(time.RFC3339Nano)}
		p.Names = append(p.Names, name)
		if p.Next.IsZero() || until.Before(p.Next) {
			p.Next = until
		}
		if cm == nil || !maps.Equal(cm.Labels, desired.Labels) || !maps.Equal(cm.Annotations, desired.Annotations) || !maps.Equal(cm.Data, desired.Data) {
			p.Write = append(p.Write, desired)
		}
	}
	return p
}
