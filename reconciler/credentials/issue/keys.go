package issue

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
)

// Keys holds the local cluster's key pair (package seal) once the bootstrapper has read
// or made it: the credentials peers issue to this cluster are sealed to its public key,
// which the bootstrapper advertises on the local Cluster. It also holds why the key pair
// is not in use, for the local Cluster's ReaderKeyReady condition (KeyCondition), and
// signals every change of that on Changes. Safe for concurrent use; the zero value holds
// nothing yet.
type Keys struct {
	mu  sync.RWMutex
	key *seal.Key
	// reported says the bootstrapper has reported once (err then tells the outcome).
	reported bool
	err      error
	changed  chan event.GenericEvent
}

// KeyState is what Keys holds: the key pair (nil while unknown), why it is not in use
// (nil once it is advertised), and whether the bootstrapper has reported yet.
type KeyState struct {
	Key      *seal.Key
	Err      error
	Reported bool
}

// ErrInvalidKeySecret is wrapped by the error of a key Secret that holds no valid key.
var ErrInvalidKeySecret = errors.New("the key Secret holds no valid key")

// NewKeys returns Keys already holding key (for callers that load the key themselves,
// and tests).
func NewKeys(key *seal.Key) *Keys { return &Keys{key: key} }

// Get returns the key pair, or nil while it is not known yet.
func (k *Keys) Get() *seal.Key {
	if k == nil {
		return nil
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.key
}

// State returns what Keys holds.
func (k *Keys) State() KeyState {
	if k == nil {
		return KeyState{}
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return KeyState{Key: k.key, Err: k.err, Reported: k.reported}
}

// Changes receives an event (for the local Cluster) when the state reported changes.
func (k *Keys) Changes() <-chan event.GenericEvent {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.changed == nil {
		k.changed = make(chan event.GenericEvent, 1)
	}
	return k.changed
}

// Set records key, the key pair the bootstrapper read or made (it reports the outcome
// with Report once it is advertised).
func (k *Keys) Set(key *seal.Key) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.key = key
}

// Report records the outcome of making, reading and advertising the key pair (nil: in
// use), and signals a change. The bootstrapper reports; exported for callers that load
// the key themselves, and tests.
func (k *Keys) Report(err error) {
	k.mu.Lock()
	same := k.reported && (k.err == nil) == (err == nil) && (err == nil || k.err.Error() == err.Error())
	k.reported, k.err = true, err
	ch := k.changed
	k.mu.Unlock()
	if same || ch == nil {
		return
	}
	select {
	case ch <- event.GenericEvent{Object: &v1alpha1.Cluster{}}:
	default: // a reconcile is already due
	}
}

// KeyCondition returns the ReaderKeyReady condition of the local Cluster for state s,
// and false while the bootstrapper has not reported yet (the condition is left as it
// is).
func KeyCondition(s KeyState, namespace string) (v1alpha1.ClusterCondition, bool) {
	if !s.Reported {
		return v1alpha1.ClusterCondition{}, false
	}
	ref := v1alpha1.ReadersNamespace(namespace) + "/" + v1alpha1.ReaderKeySecretName
	switch {
	case s.Err == nil && s.Key != nil:
		return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, true, v1alpha1.ReasonReaderKeyAdvertised,
			fmt.Sprintf("the key pair is in Secret %s and its public key (fingerprint %s) is advertised on this Cluster: peers seal the credentials they issue this cluster to it",
				ref, seal.Fingerprint(s.Key.PublicKey()))), true
	case errors.Is(s.Err, ErrInvalidKeySecret):
		return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, false, v1alpha1.ReasonReaderKeyInvalid,
			fmt.Sprintf("%v. The credentials peers sealed to this cluster's key are not used (this cluster reads them with their shared reader Secrets); once the Secret is deleted, the controller makes a new key pair and advertises it, and the peers seal to the new key once they read it", s.Err)), true
	case s.Err != nil:
		return conditions.New(v1alpha1.ClusterConditionReaderKeyReady, false, v1alpha1.ReasonReaderKeySecretFailed,
			fmt.Sprintf("%v. Until the key is read and advertised, the credentials sealed to it are not used and peers that read no key on this Cluster issue it none (it reads only their membership, none of their objects). Check that the readers namespace %s exists (kubectl registry install) and that the controller may get and create Secrets there and patch this Cluster", s.Err, v1alpha1.ReadersNamespace(namespace))), true
	}
	return v1alpha1.ClusterCondition{}, false
}

// Opener returns the function that opens a credential an issuer sealed to recipient (the
// local cluster) with the key pair, or nil while the key pair is not known.
func (k *Keys) Opener(recipient types.UID) func(issuer types.UID, sealed []byte) ([]byte, error) {
	key := k.Get()
	if key == nil {
		return nil
	}
	return func(issuer types.UID, sealed []byte) ([]byte, error) { return key.Open(issuer, recipient, sealed) }
}
