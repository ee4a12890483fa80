package members

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig/document"
)

// Offer is what one peer relays of a cluster this cluster has no Cluster CR of yet: the
// name, ID, API server, CA and public key its copies say.
type Offer struct {
	// Peer is the name of the peer that relays it.
	Peer string
	// Name and ClusterID are those of the relayed Cluster.
	Name      string
	ClusterID types.UID
	// Server is the API server its reader Secret names.
	Server string
	// CA and Key are fingerprints (sha256:<first 16 hex digits>) of the CA bundle its
	// reader Secret names and of the public key its Cluster advertises; "none" when
	// absent.
	CA, Key string
}

func (o Offer) same(p Offer) bool {
	return o.Name == p.Name && o.ClusterID == p.ClusterID && o.Server == p.Server && o.CA == p.CA && o.Key == p.Key
}

func (o Offer) String() string {
	return fmt.Sprintf("peer %s relays Cluster %s (clusterID %s) at %s, CA %s, public key %s", o.Peer, o.Name, o.ClusterID, o.Server, o.CA, o.Key)
}

// RelayConflict is a cluster this cluster knows only through relays that disagree: it
// is not learnt, whichever peer is senior, until they agree or this cluster's admin
// joins it here (kubectl registry join, or the seed's swap).
type RelayConflict struct {
	// Names are the Cluster names concerned, sorted.
	Names []string
	// Offers are the relays, sorted by peer, then name.
	Offers []Offer
}

// Message says what disagrees and what to do.
func (c RelayConflict) Message() string {
	parts := make([]string, len(c.Offers))
	for i, o := range c.Offers {
		parts[i] = o.String()
	}
	return fmt.Sprintf("Cluster %s not learnt: the members that relay it disagree (%s); it is learnt once they agree, or when an admin of this cluster joins it here with kubectl registry join",
		strings.Join(c.Names, ", "), strings.Join(parts, "; "))
}

func fingerprint(b []byte) string {
	if len(b) == 0 {
		return "none"
	}
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:8])
}

// offerOf describes what view relays of c with its reader Secret s.
func offerOf(view View, c *v1alpha1.Cluster, s *corev1.Secret) Offer {
	o := Offer{Peer: view.Name, Name: c.Name, ClusterID: c.Spec.ClusterID, Server: "none", CA: "none",
		Key: fingerprint([]byte(c.Annotations[v1alpha1.ReaderPublicKeyAnnotation]))}
	if s != nil {
		if r, ok := document.Read(s.Data[v1alpha1.KubeconfigKey]); ok {
			o.Server, o.CA = r.Server, fingerprint(r.CAData)
		}
	}
	return o
}

// relayConflicts groups the offers of clusters learnt only through relays: a name
// offered with more than one (ID, server, CA, key), or an ID offered under more than
// one name, is a conflict. It returns the conflicts and the names they cover.
func relayConflicts(offers map[string][]Offer) ([]RelayConflict, map[string]bool) {
	// Names that share an ID are judged together.
	parent := map[string]string{}
	var find func(string) string
	find = func(n string) string {
		if p, ok := parent[n]; ok && p != n {
			r := find(p)
			parent[n] = r
			return r
		}
		return n
	}
	byID := map[types.UID]string{}
	for _, name := range slices.Sorted(maps.Keys(offers)) {
		parent[name] = name
	}
	for _, name := range slices.Sorted(maps.Keys(offers)) {
		for _, o := range offers[name] {
			if other, ok := byID[o.ClusterID]; ok {
				a, b := find(other), find(name)
				if a != b {
					parent[max(a, b)] = min(a, b)
				}
			} else {
				byID[o.ClusterID] = name
			}
		}
	}
	groups := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(offers)) {
		r := find(name)
		groups[r] = append(groups[r], name)
	}
	var out []RelayConflict
	covered := map[string]bool{}
	for _, r := range slices.Sorted(maps.Keys(groups)) {
		names := groups[r]
		var all []Offer
		for _, n := range names {
			all = append(all, offers[n]...)
		}
		agree := true
		for _, o := range all[1:] {
			if !o.same(all[0]) {
				agree = false
				break
			}
		}
		if agree {
			continue
		}
		slices.SortFunc(all, func(a, b Offer) int {
			if c := strings.Compare(a.Peer, b.Peer); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		all = slices.CompactFunc(all, Offer.same)
		out = append(out, RelayConflict{Names: names, Offers: all})
		for _, n := range names {
			covered[n] = true
		}
	}
	return out, covered
}

// unread returns the names of the members this cluster last saw Ready, or whose
// connection is still being made (their Cluster's state here: Ready; or none, with the
// Ready condition Unknown: at a restart the status reconciler sets that while the first
// connection is made, and a hostile relay read meanwhile would be the only one), whose
// view is not read now: not Ready, read with the bootstrap credential, or not connected yet.
// Departed and disabled members are not waited for; nor is a member whose connection
// failed (a state other than Ready), which is not read until it answers again.
func unread(in Input, ready map[types.UID]bool, gone Departures, disabled map[types.UID]bool) []string {
	var out []string
	for i := range in.Local.Clusters {
		c := &in.Local.Clusters[i]
		x := c.Spec.ClusterID
		if _, left := gone[x]; x == "" || x == in.LocalID || left || disabled[x] || ready[x] {
			continue
		}
		if c.Status.State == v1alpha1.ClusterStateReady || (c.Status.State == "" && connecting(c)) {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// connecting reports whether the Cluster's Ready condition is Unknown: its connection is
// being made.
func connecting(c *v1alpha1.Cluster) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == v1alpha1.ClusterConditionReady {
			return cond.Status == corev1.ConditionUnknown
		}
	}
	return false
}
