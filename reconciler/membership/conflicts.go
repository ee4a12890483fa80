package membership

import (
	"slices"
	"strconv"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
)

// RelayConflicts holds the clusters the last membership plan refused to learn because
// the members relaying them disagree (members.RelayConflict), for the local Cluster's
// RelaysAgree condition. Safe for concurrent use.
type RelayConflicts struct {
	mu       sync.Mutex
	messages []string
	known    bool
	changed  chan event.GenericEvent
}

// NewRelayConflicts returns an empty store.
func NewRelayConflicts() *RelayConflicts {
	return &RelayConflicts{changed: make(chan event.GenericEvent, 1)}
}

// Set records the messages of the conflicts found, signalling a change.
func (r *RelayConflicts) Set(messages []string) {
	if r == nil {
		return
	}
	messages = slices.Clone(messages)
	slices.Sort(messages)
	r.mu.Lock()
	same := r.known && slices.Equal(r.messages, messages)
	r.messages, r.known = messages, true
	r.mu.Unlock()
	if same {
		return
	}
	select {
	case r.changed <- event.GenericEvent{Object: &v1alpha1.Cluster{}}:
	default: // a reconcile is already due
	}
}

// Changes receives an event when the conflicts change.
func (r *RelayConflicts) Changes() <-chan event.GenericEvent { return r.changed }

// maxConditionConflicts is how many conflicts the condition's message names.
const maxConditionConflicts = 3

// Condition returns the local Cluster's RelaysAgree condition, and false before the
// first membership plan.
func (r *RelayConflicts) Condition() (v1alpha1.ClusterCondition, bool) {
	if r == nil {
		return v1alpha1.ClusterCondition{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.known {
		return v1alpha1.ClusterCondition{}, false
	}
	if len(r.messages) == 0 {
		return conditions.New(v1alpha1.ClusterConditionRelaysAgree, true, v1alpha1.ReasonRelaysAgree,
			"every cluster learnt only through relays was relayed alike by the members that relay it"), true
	}
	msg := ""
	for i, m := range r.messages {
		if i == maxConditionConflicts {
			msg += "; and " + strconv.Itoa(len(r.messages)-i) + " more (see the MembershipRefused events)"
			break
		}
		if i > 0 {
			msg += "; "
		}
		msg += m
	}
	return conditions.New(v1alpha1.ClusterConditionRelaysAgree, false, v1alpha1.ReasonConflictingRelays, msg), true
}
