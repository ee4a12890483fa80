package rulestatus

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// WatchNote says how a rule's watches are narrowed, for its WatchesNarrowed condition
// (none without a Reason).
type WatchNote struct {
	Narrowed        bool
	Reason, Message string
}

// Sources are how a rule's sources fare: the state of each peer as a source, how many
// fail, and those over the cap on objects or the byte limits (TooMany, with their
// reason, TooManyReason).
type Sources struct {
	States        []v1alpha1.RuleSource
	Failing       int
	TooMany       []string
	TooManyReason string
}

// Input is what a rule's status is computed from.
type Input struct {
	Rule *v1alpha1.ResourceSyncRule
	// Err is the rule's error: past the cap on rules (then Capped), invalid
	// (*rules.InvalidRuleError), or of a kind the cluster does not serve.
	Err    error
	Capped bool
	// Refusal is this cluster's policy's refusal of the rule, if it refuses it.
	Refusal *planner.Refusal
	Sources Sources
	Tally   Tally
	Watch   WatchNote
	// MaxHold is the longest hold of a copy (planner.SettlePolicy), for the message of
	// the held copies.
	MaxHold time.Duration
}

// Compute returns the status of in.Rule: its sources, its counts and its conditions
// (Allowed, Ready, Conflict, Degraded, WatchesNarrowed, and Drifted for a ReportOnly
// rule), the others of its current status kept.
func Compute(in Input) v1alpha1.ResourceSyncRuleStatus {
	r := in.Rule
	st := *r.Status.DeepCopy()
	st.ObservedGeneration = r.Generation
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: r.Generation})
	}
	st.Sources = in.Sources.States
	t := in.Tally
	st.SyncedObjects, st.Conflicts, st.Drift = t.Synced, t.Conflicts, t.Drift
	if !t.LastSync.IsZero() {
		ls := metav1.NewTime(t.LastSync.Truncate(time.Second))
		st.LastSyncTime = &ls
	}
	if in.Refusal != nil {
		set(v1alpha1.RuleConditionAllowed, false, in.Refusal.Reason, in.Refusal.Message)
	} else {
		set(v1alpha1.RuleConditionAllowed, true, v1alpha1.ReasonAllowed, "")
	}
	_, invalid := in.Err.(*rules.InvalidRuleError)
	switch {
	case in.Err != nil && in.Capped:
		set(v1alpha1.RuleConditionReady, false, v1alpha1.ReasonTooManyRules, in.Err.Error())
	case in.Err != nil && invalid:
		set(v1alpha1.RuleConditionReady, false, v1alpha1.ReasonInvalidRule, in.Err.Error())
	case in.Err != nil:
		set(v1alpha1.RuleConditionReady, false, v1alpha1.ReasonUnknownKind, in.Err.Error())
	case in.Refusal != nil:
		set(v1alpha1.RuleConditionReady, false, in.Refusal.Reason, "the rule does not run in this cluster: "+in.Refusal.Message)
	default:
		set(v1alpha1.RuleConditionReady, true, v1alpha1.ReasonSynced, fmt.Sprintf("%d objects synced", st.SyncedObjects))
	}
	setHealth(set, t, in.Sources, in.MaxHold)
	if in.Watch.Reason != "" {
		set(v1alpha1.RuleConditionWatchesNarrowed, in.Watch.Narrowed, in.Watch.Reason, in.Watch.Message)
	}
	if r.Spec.SyncMode == v1alpha1.SyncModeReportOnly {
		if st.Drift > 0 {
			set(v1alpha1.RuleConditionDrifted, true, v1alpha1.ReasonDrift,
				fmt.Sprintf("%d copies differ from their sources; syncMode ReportOnly writes nothing: %s", st.Drift, t.DriftList))
		} else {
			set(v1alpha1.RuleConditionDrifted, false, v1alpha1.ReasonNoDrift, "")
		}
	} else {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.RuleConditionDrifted)
	}
	return st
}

// setHealth sets the Conflict and Degraded conditions of a rule (set) from its tally and
// its sources.
func setHealth(set func(t string, ok bool, reason, msg string), t Tally, src Sources, maxHold time.Duration) {
	overlapMsg := ""
	if t.NOverlaps > 0 {
		overlapMsg = fmt.Sprintf("%d objects this rule matches are written by another rule, which takes precedence: %s", t.NOverlaps, t.Overlaps)
	}
	switch {
	case t.Conflicts > 0:
		set(v1alpha1.RuleConditionConflict, true, v1alpha1.ReasonObjectConflict,
			joinMsg(fmt.Sprintf("%d local objects without the ownership mark are in the way and were not touched: %s", t.Conflicts, t.ConflictList), overlapMsg))
	case t.NOverlaps > 0:
		set(v1alpha1.RuleConditionConflict, true, v1alpha1.ReasonRuleOverlap, overlapMsg)
	default:
		set(v1alpha1.RuleConditionConflict, false, v1alpha1.ReasonNoConflicts, "")
	}
	heldMsg := ""
	if t.NHeld > 0 {
		heldMsg = fmt.Sprintf("%d copies are changed by something else after each write and are no longer rewritten on every change (held, backing off up to %s; "+
			"if a local controller, an HPA or a mutating webhook owns the fields, list them in the rule's spec.ignoreFields; otherwise stop the other writer): %s",
			t.NHeld, maxHold, t.Held)
	}
	failuresMsg := ""
	if t.NFailures > 0 {
		failuresMsg = fmt.Sprintf("%d objects fail to sync: %s", t.NFailures, t.Failures)
	}
	switch {
	case len(src.TooMany) > 0:
		set(v1alpha1.RuleConditionDegraded, true, src.TooManyReason, joinMsg(joinMsg(strings.Join(src.TooMany, "; "), failuresMsg), heldMsg))
	case t.NFailures > 0:
		set(v1alpha1.RuleConditionDegraded, true, failureReason(t.FailureReasons), joinMsg(fmt.Sprintf("%d objects fail to sync: %s", t.NFailures, t.Failures), heldMsg))
	case src.Failing > 0:
		set(v1alpha1.RuleConditionDegraded, true, v1alpha1.ReasonSourceFailing, joinMsg(fmt.Sprintf("%d sources fail; see status.sources", src.Failing), heldMsg))
	case t.NHeld > 0:
		set(v1alpha1.RuleConditionDegraded, true, v1alpha1.ReasonChangedAfterWrite, heldMsg)
	default:
		set(v1alpha1.RuleConditionDegraded, false, v1alpha1.ReasonAllSourcesOK, "")
	}
}

// failureReason is the Degraded reason of objects that fail for reasons: the one
// reason they share, or CopiesFailing.
func failureReason(reasons map[string]int) string {
	if len(reasons) == 1 {
		for r := range reasons {
			return r
		}
	}
	return v1alpha1.ReasonCopiesFailing
}

func joinMsg(msg, more string) string {
	if more == "" {
		return msg
	}
	return msg + "; " + more
}

// Overlaps returns, for the rules among the candidates cands that ask for the object of
// act but do not write it, which rule writes it instead and why (planner.RuleWhy): one
// rule writes each copy, and a member's rule that matches another member's objects is
// told it does not. A rule not in it no longer overlaps on the object.
func Overlaps(act planner.Action, cands []planner.Candidate) map[string]string {
	why := map[string]string{}
	if chosen := act.Source; chosen != nil {
		for _, c := range cands {
			if c.Rule != chosen.Rule && c.Origin == chosen.Origin {
				if _, ok := why[c.Rule]; !ok {
					why[c.Rule] = planner.RuleWhy(*chosen, c)
				}
			}
		}
	}
	return why
}

// Writer patches the status of the rules.
type Writer struct {
	Client client.Client
}

// Write brings the status of the rule named name up to date: it reads the rule, computes
// its status (compute, of the rule as read, which it may keep) and patches it when it
// changed.
func (w Writer) Write(ctx context.Context, name string, compute func(cur *v1alpha1.ResourceSyncRule) v1alpha1.ResourceSyncRuleStatus) error {
	var cur v1alpha1.ResourceSyncRule
	if err := w.Client.Get(ctx, client.ObjectKey{Name: name}, &cur); err != nil {
		return err
	}
	st := compute(cur.DeepCopy())
	if apiequality.Semantic.DeepEqual(cur.Status, st) {
		return nil
	}
	before := cur.DeepCopy()
	cur.Status = st
	return w.Client.Status().Patch(ctx, &cur, client.MergeFrom(before), client.FieldOwner(v1alpha1.FieldManager))
}
