package credentials

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// PeerKeys holds the public key each peer advertises on its own Cluster, as read from
// the peer's API server over this cluster's connection to it (pinned server and CA, its
// cluster ID checked): the only source a credential is sealed by. The annotation on the
// local copy of a peer's Cluster is not used, since a member that relayed the copy could
// have written it. A peer whose own Cluster has not been read yet is issued nothing, so
// that nothing is issued before its key is known; one whose own Cluster advertises none
// is issued nothing either (nothing is ever issued unsealed). Safe for
// concurrent use.
type PeerKeys struct {
	mu   sync.Mutex
	keys map[types.UID]string
	// changed receives an event when a peer's key is first read or changes.
	changed chan event.GenericEvent
}

// NewPeerKeys returns an empty store.
func NewPeerKeys() *PeerKeys {
	return &PeerKeys{keys: map[types.UID]string{}, changed: make(chan event.GenericEvent, 1)}
}

// Set records the key peer id advertises on its own Cluster ("" for none).
func (k *PeerKeys) Set(id types.UID, key string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	old, known := k.keys[id]
	k.keys[id] = key
	k.mu.Unlock()
	if known && old == key {
		return
	}
	select {
	case k.changed <- event.GenericEvent{Object: &v1alpha1.Cluster{}}:
	default: // a reconcile is already due
	}
}

// Get returns the key of peer id and whether its own Cluster has been read.
func (k *PeerKeys) Get(id types.UID) (string, bool) {
	if k == nil {
		return "", false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.keys[id]
	return key, ok
}
