// Package rulestatus is what the engine reports on its ResourceSyncRules: what each rule
// knows of the objects it covers (Tracker: synced, in conflict, failing, drifted, held,
// written by another rule), the status and conditions computed from it and from the
// rule's sources (Compute, pure), and the status patch (Writer).
package rulestatus

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Key is a local object a rule tracks; its String names it in the rule's status.
type Key interface {
	comparable
	String() string
}

// Failure is an object a rule cannot sync: the condition reason and what happened.
type Failure struct {
	Reason, Message string
}

// Tracker is what one rule knows of the objects it covers, for its status. It is safe
// for concurrent use.
type Tracker[K Key] struct {
	mu        sync.Mutex
	conflicts map[K]string
	failures  map[K]Failure
	synced    map[K]bool
	// drift are the writes a ReportOnly rule withholds, with the reason.
	drift map[K]string
	// held are the copies not rewritten because something changes them after each
	// write, with the reason.
	held map[K]string
	// overlaps are the objects the rule matches that another rule, which takes
	// precedence, writes, with the reason (planner.RuleWhy).
	overlaps map[K]string
	lastSync time.Time
	// watch says how the rule's watches are narrowed.
	watch WatchNote
}

// NewTracker returns a Tracker that knows nothing yet.
func NewTracker[K Key]() *Tracker[K] {
	return &Tracker[K]{conflicts: map[K]string{}, failures: map[K]Failure{}, synced: map[K]bool{},
		drift: map[K]string{}, held: map[K]string{}, overlaps: map[K]string{}}
}

// forget drops what the rule knows of the object; t.mu is held.
func (t *Tracker[K]) forget(k K) {
	delete(t.conflicts, k)
	delete(t.failures, k)
	delete(t.synced, k)
	delete(t.held, k)
	delete(t.drift, k)
	delete(t.overlaps, k)
}

// Record records the outcome of a look at k: a conflict (its reason), else a failure,
// else synced or not; what was known of k before is forgotten.
func (t *Tracker[K]) Record(k K, synced bool, conflict string, fail Failure) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(k)
	switch {
	case conflict != "":
		t.conflicts[k] = conflict
	case fail.Message != "":
		t.failures[k] = fail
	case synced:
		t.synced[k] = true
	}
}

// Failed returns the failure recorded of k, if any.
func (t *Tracker[K]) Failed(k K) (Failure, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.failures[k]
	return f, ok
}

// IsSynced reports whether k is recorded synced.
func (t *Tracker[K]) IsSynced(k K) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.synced[k]
}

// Drifted records a write the rule's ReportOnly mode withholds.
func (t *Tracker[K]) Drifted(k K, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(k)
	t.drift[k] = reason
}

// Hold records that the copy k is held: not rewritten, for reason.
func (t *Tracker[K]) Hold(k K, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(k)
	t.held[k] = reason
}

// Unhold forgets that the copy k is held by this rule.
func (t *Tracker[K]) Unhold(k K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.held, k)
}

// Overlap records (or, with an empty reason, forgets) that another rule writes k.
func (t *Tracker[K]) Overlap(k K, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if reason == "" {
		delete(t.overlaps, k)
		return
	}
	if t.overlaps[k] == reason {
		return
	}
	t.forget(k)
	t.overlaps[k] = reason
}

// Synced records that the rule wrote a copy at now.
func (t *Tracker[K]) Synced(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastSync = now
}

// LastSync is when the rule last wrote a copy (zero: never).
func (t *Tracker[K]) LastSync() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastSync
}

// SetWatch records how the rule's watches are narrowed.
func (t *Tracker[K]) SetWatch(w WatchNote) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watch = w
}

// Watch returns how the rule's watches are narrowed.
func (t *Tracker[K]) Watch() WatchNote {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.watch
}

// HeldAndDrifted counts the copies held and the drift withheld, for the metrics.
func (t *Tracker[K]) HeldAndDrifted() (held, drift int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.held), len(t.drift)
}

// Tally is what a Tracker knows, counted and summarized for the rule's status.
type Tally struct {
	Synced, Conflicts, Drift int32
	LastSync                 time.Time
	// ConflictList, Failures, DriftList, Held and Overlaps summarize the first objects of
	// each, with their reasons; FailureReasons counts the failures by reason.
	ConflictList, Failures, DriftList, Held, Overlaps string
	NFailures, NHeld, NOverlaps                       int
	FailureReasons                                    map[string]int
}

// Tally counts and summarizes what the tracker knows.
func (t *Tracker[K]) Tally() Tally {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := Tally{Synced: int32(len(t.synced)), Conflicts: int32(len(t.conflicts)), Drift: int32(len(t.drift)), LastSync: t.lastSync,
		ConflictList: summarize(t.conflicts, 5), DriftList: summarizeReasons(t.drift, 5),
		NHeld: len(t.held), Held: summarizeReasons(t.held, 5), NOverlaps: len(t.overlaps), Overlaps: summarizeReasons(t.overlaps, 5),
		NFailures: len(t.failures), FailureReasons: map[string]int{}}
	failureMsgs := make(map[K]string, len(t.failures))
	for k, f := range t.failures {
		failureMsgs[k] = f.Message
		out.FailureReasons[f.Reason]++
	}
	out.Failures = summarizeReasons(failureMsgs, 5)
	return out
}

// summarizeReasons lists the first objects of m, by name, each with its reason.
func summarizeReasons[K Key](m map[K]string, max int) string {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var parts []string
	for i, k := range keys {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// summarize lists the first objects of m, by name.
func summarize[K Key](m map[K]string, max int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k.String())
	}
	sort.Strings(keys)
	more := ""
	if len(keys) > max {
		more = fmt.Sprintf(" and %d more", len(keys)-max)
		keys = keys[:max]
	}
	return strings.Join(keys, ", ") + more
}
