package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Candidate is the copy one source peer asks for, after matching and mutation, with the
// ownership marks set.
type Candidate struct {
	// Rule is the name of the ResourceSyncRule that produced it.
	Rule string
	// RuleOrigin is the cluster the rule was made on: the ownership mark of this
	// cluster's copy of it, empty for a rule made here (see RuleRank).
	RuleOrigin types.UID
	// RuleSince is when the rule reached this cluster: the creation time of this
	// cluster's object of it, which this cluster's API server sets and no member writes.
	RuleSince time.Time
	// Peer and PeerID name the source peer.
	Peer   string
	PeerID types.UID
	// Origin is the cluster the object comes from (kept across hops).
	Origin types.UID
	// Object is the desired copy.
	Object *unstructured.Unstructured
	// SyncStatus says the copy's status follows the source.
	SyncStatus bool
	// Kept is what the destination keeps of the copy: the fields its cluster assigns and
	// the rule's ignoreFields (see Kept.Localize).
	Kept Kept
}

// Desired returns the copy the candidate asks for at the destination whose object is
// observed (nil when there is none): Object with the destination's values at the kept
// fields.
func (c Candidate) Desired(observed *unstructured.Unstructured) *unstructured.Unstructured {
	return c.Kept.Localize(c.Object, observed)
}

// Drift lists, sorted, where observed differs from what the candidate asks for (Changes
// after Desired): the kept fields never count.
func (c Candidate) Drift(observed *unstructured.Unstructured, syncStatus bool) []string {
	return Changes(c.Desired(observed), observed, syncStatus)
}

// Input is what Decide decides one local object from.
type Input struct {
	// LocalID is the local cluster's ID.
	LocalID types.UID
	// Observed is the local object at the key, nil when there is none.
	Observed *unstructured.Unstructured
	// Candidates are the copies the sources ask for.
	Candidates []Candidate
	// OriginGone holds the origins seen, through a healthy synced watch, to no longer
	// have a matching object for this key: the positive observation a delete needs.
	OriginGone map[types.UID]bool
	// Modes are the sync modes of the rules that cover the key, by rule name; a rule
	// missing here enforces.
	Modes map[string]v1alpha1.SyncMode
}

// ActionType is what Decide asks for.
type ActionType string

// The actions.
const (
	ActionNone     ActionType = "none"
	ActionCreate   ActionType = "create"
	ActionUpdate   ActionType = "update"
	ActionDelete   ActionType = "delete"
	ActionConflict ActionType = "conflict"
)

// Action is the decision for one local object.
type Action struct {
	Type ActionType
	// Object is what to write for create and update (an update carries the observed
	// resourceVersion), or the object to delete.
	Object *unstructured.Unstructured
	// Source is the candidate chosen, for create and update.
	Source *Candidate
	// Reason explains a conflict, a delete, a skipped source or a withheld write.
	Reason string
	// Withheld is the write (create, update or delete) the rule's syncMode holds back:
	// then Type is none, and Object is what would be written (or deleted).
	Withheld ActionType
}

// Which origin a copy follows. Several origins may offer an object for the same local
// key (the same name made on two members, or rewrites that map two names onto one).
// Every member must pick the same one, whatever the order in which it came to see them,
// so the choice is a total order on the candidates that every member computes alike:
//
//  1. the lowest origin cluster ID (the UID of the origin's kube-system namespace),
//     compared as strings: names are local (a Cluster CR may be renamed), IDs are not;
//  2. for the same origin, a copy read from the origin itself before one read through
//     another member (a hop);
//  3. which rule writes it, by who made the rule (RuleRank): a rule made here, then a
//     rule made on the object's origin, then a rule made on a third member; among third
//     members' rules the one that reached this cluster first (RuleSince), so that a
//     member's rule made after another member's takes none of its objects, new or old;
//     then the lower cluster ID the rule was made on, then the rule name;
//  4. then the source peer's cluster ID, then its name, so that the answer never
//     depends on the order of the input.
//
// A new copy follows the first candidate (Choose). An existing copy keeps following its
// own origin while that origin still offers the object, and keeps the rule that wrote it
// while that rule still asks for it and no rule of a better rank does (see Decide): the
// order decides only which origin and rule a copy starts from, or takes over from when
// its origin is seen to no longer have the object. So a copy never flaps, and a member's
// rule that matches another member's objects never takes their copies over from the
// rule that writes them: one rule writes each copy, chosen by who owns the object.

// Rule ranks (RuleRank): who made the rule a candidate comes from.
const (
	// RankLocal: the rule was made in this cluster, by its own admins.
	RankLocal = 0
	// RankOrigin: the rule was made on the cluster the object comes from.
	RankOrigin = 1
	// RankThird: the rule was made on another member.
	RankThird = 2
)

// RuleRank says who made the candidate's rule: RankLocal, RankOrigin or RankThird.
func (c Candidate) RuleRank() int {
	switch c.RuleOrigin {
	case "":
		return RankLocal
	case c.Origin:
		return RankOrigin
	}
	return RankThird
}

// Less reports whether candidate a is chosen before b (the order above).
func Less(a, b Candidate) bool {
	if a.Origin != b.Origin {
		return a.Origin < b.Origin
	}
	ad, bd := a.PeerID == a.Origin, b.PeerID == b.Origin
	if ad != bd {
		return ad
	}
	ar, br := a.RuleRank(), b.RuleRank()
	if ar != br {
		return ar < br
	}
	if ar == RankThird && !a.RuleSince.Equal(b.RuleSince) {
		return a.RuleSince.Before(b.RuleSince)
	}
	if a.RuleOrigin != b.RuleOrigin {
		return a.RuleOrigin < b.RuleOrigin
	}
	if a.Rule != b.Rule {
		return a.Rule < b.Rule
	}
	if a.PeerID != b.PeerID {
		return a.PeerID < b.PeerID
	}
	return a.Peer < b.Peer
}

// Rank returns the candidates in the order they are chosen (a new slice; cands is not
// changed).
func Rank(cands []Candidate) []Candidate {
	sorted := append([]Candidate(nil), cands...)
	sort.SliceStable(sorted, func(i, j int) bool { return Less(sorted[i], sorted[j]) })
	return sorted
}

// Choose returns the candidate a new copy follows: the first in the order of Less (the
// lowest origin cluster ID), or nil when there is none.
func Choose(cands []Candidate) *Candidate {
	if len(cands) == 0 {
		return nil
	}
	return &Rank(cands)[0]
}

// Decide is the planner: desired against observed. It is pure. Its rules:
//   - no local object: create the chosen candidate;
//   - a local object without the ownership mark was made here and is never touched: a
//     conflict;
//   - a copy follows its own origin's candidate when there is one; a copy of another
//     origin than the chosen candidate's is taken over only once its origin is seen to
//     no longer have the object;
//   - a copy keeps the rule that wrote it while that rule still asks for it and no rule
//     of a better rank (made here, or on the object's origin) does (keepRule);
//   - a copy that differs from the candidate is updated (exact restore of the mutated
//     source; finalizers and ownerReferences stay as the local cluster set them);
//   - a copy with no candidate is deleted only with the positive observation that its
//     origin no longer has it; otherwise it is left as it is.
//
// The fields the destination keeps (Candidate.Kept) are never written or compared: a new
// copy is created without the fields its cluster assigns, and an existing one keeps its
// values. Last, the rule's syncMode may withhold the write (Withhold).
func Decide(in Input) Action {
	return Withhold(decide(in), in.Modes)
}

func decide(in Input) Action {
	best := Choose(in.Candidates)
	obs := in.Observed
	if best == nil {
		if obs == nil {
			return Action{Type: ActionNone}
		}
		mark := types.UID(obs.GetAnnotations()[v1alpha1.OwnershipAnnotation])
		if mark == "" || mark == in.LocalID {
			return Action{Type: ActionNone}
		}
		if in.OriginGone[mark] {
			return Action{Type: ActionDelete, Object: obs, Reason: fmt.Sprintf("origin cluster %s no longer has a matching object", mark)}
		}
		return Action{Type: ActionNone, Reason: "no source has the object, but its origin has not been seen to delete it"}
	}
	if obs == nil {
		return Action{Type: ActionCreate, Object: best.Desired(nil).DeepCopy(), Source: best}
	}
	mark := types.UID(obs.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	if mark != "" && mark != in.LocalID && mark != best.Origin {
		// The copy keeps following its own origin while that origin still asks for it,
		// even when another origin's candidate sorts first.
		var same []Candidate
		for _, c := range in.Candidates {
			if c.Origin == mark {
				same = append(same, c)
			}
		}
		if c := Choose(same); c != nil {
			best = c
		}
	}
	if mark != "" && mark != in.LocalID {
		best = keepRule(in.Candidates, best, obs.GetLabels()[v1alpha1.RuleLabel])
	}
	switch {
	case mark == "":
		return Action{Type: ActionConflict, Object: obs, Source: best, Reason: "a local object without the ownership mark is in the way"}
	case mark == in.LocalID:
		return Action{Type: ActionConflict, Object: obs, Source: best, Reason: "the local object is marked as originating in this cluster"}
	case mark != best.Origin && !in.OriginGone[mark]:
		return Action{Type: ActionConflict, Object: obs, Source: best,
			Reason: fmt.Sprintf("the local copy comes from cluster %s, which still has it; cluster %s has one too", mark, best.Origin)}
	}
	desired := best.Desired(obs)
	if Equal(desired, obs, best.SyncStatus) {
		// The source names the rule the copy is synced by, for the rule's status.
		return Action{Type: ActionNone, Source: best}
	}
	return Action{Type: ActionUpdate, Object: Merge(desired, obs, best.SyncStatus), Source: best}
}

// keepRule returns the candidate of the rule that wrote the copy (named by its rule
// label) when that rule still asks for it from best's origin, through the same kind of
// read, with the same rank as best: a copy keeps its rule among equals. Otherwise best.
func keepRule(cands []Candidate, best *Candidate, wrote string) *Candidate {
	if wrote == "" || wrote == best.Rule {
		return best
	}
	var same []Candidate
	for _, c := range cands {
		if c.Rule == wrote && c.Origin == best.Origin && (c.PeerID == c.Origin) == (best.PeerID == best.Origin) && c.RuleRank() == best.RuleRank() {
			same = append(same, c)
		}
	}
	if c := Choose(same); c != nil {
		return c
	}
	return best
}

// Rule returns the rule the action is for: its source's, or for an action without a
// source (a delete) the rule that wrote the object; empty when neither is known.
func (a Action) Rule() string {
	switch {
	case a.Source != nil:
		return a.Source.Rule
	case a.Object != nil:
		return a.Object.GetLabels()[v1alpha1.RuleLabel]
	}
	return ""
}

// Withhold applies the sync mode of the action's rule (the source's, or for a delete the
// rule that wrote the copy): ReportOnly withholds every write, CreateOnly every update and
// delete. A withheld action has type none and says in Withheld what it would have done.
func Withhold(act Action, modes map[string]v1alpha1.SyncMode) Action {
	rule := act.Rule()
	mode := modes[rule]
	switch {
	case mode == v1alpha1.SyncModeReportOnly && (act.Type == ActionCreate || act.Type == ActionUpdate || act.Type == ActionDelete):
	case mode == v1alpha1.SyncModeCreateOnly && (act.Type == ActionUpdate || act.Type == ActionDelete):
	default:
		return act
	}
	reason := fmt.Sprintf("rule %s has syncMode %s: would %s", rule, mode, act.Type)
	if act.Reason != "" {
		reason += " (" + act.Reason + ")"
	}
	return Action{Type: ActionNone, Object: act.Object, Source: act.Source, Reason: reason, Withheld: act.Type}
}

// Equal reports whether the observed object already is the desired copy: same labels,
// annotations and content (everything but metadata and, unless syncStatus, status).
func Equal(desired, observed *unstructured.Unstructured, syncStatus bool) bool {
	if !equalMap(desired.GetLabels(), observed.GetLabels()) || !equalMap(desired.GetAnnotations(), observed.GetAnnotations()) {
		return false
	}
	return apiequality.Semantic.DeepEqual(content(desired.Object, syncStatus), content(observed.Object, syncStatus))
}

func equalMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func content(obj map[string]any, withStatus bool) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k == "metadata" || (k == "status" && !withStatus) {
			continue
		}
		out[k] = v
	}
	return out
}

// Merge returns the update that turns observed into desired: desired's content, labels
// and annotations on observed's identity (name, namespace, uid, resourceVersion) and with
// the metadata the local cluster owns (finalizers, ownerReferences) kept. Without
// syncStatus the observed status is kept.
func Merge(desired, observed *unstructured.Unstructured, syncStatus bool) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range desired.DeepCopy().Object {
		if k == "metadata" || (k == "status" && !syncStatus) {
			continue
		}
		out.Object[k] = v
	}
	if st, ok := observed.Object["status"]; ok && !syncStatus {
		out.Object["status"] = runtimeDeepCopy(st)
	}
	meta, _ := runtimeDeepCopy(observed.Object["metadata"]).(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	out.Object["metadata"] = meta
	out.SetLabels(desired.GetLabels())
	out.SetAnnotations(desired.GetAnnotations())
	return out
}

func runtimeDeepCopy(v any) any {
	if v == nil {
		return nil
	}
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

// Settling. A copy that something in the local cluster changes after each of our writes
// (a mutating admission webhook, defaulting our copy does not have, another controller
// or a user restoring their version) would otherwise be rewritten forever: every write
// is followed by a change, every change by a watch event, every event by a write. The
// engine remembers its recent writes of each copy (WriteHistory) and asks Settle, before
// each write, whether to write or to hold the copy as it is for a while, backing off.

// SettlePolicy bounds the rewrites of one copy.
type SettlePolicy struct {
	// Window and MaxWrites: a copy written MaxWrites times within Window with the same
	// desired content is changed by someone else after each write. Once a copy has been
	// held, two writes within Window are enough.
	Window    time.Duration
	MaxWrites int
	// Hold is how long the first hold lasts; each further hold in a row doubles it, up
	// to MaxHold. After a hold the copy is written once more, to see whether the other
	// writer is gone.
	Hold    time.Duration
	MaxHold time.Duration
}

// DefaultSettlePolicy is the engine's policy.
func DefaultSettlePolicy() SettlePolicy {
	return SettlePolicy{Window: time.Minute, MaxWrites: 5, Hold: 5 * time.Minute, MaxHold: time.Hour}
}

// WriteHistory is what the engine remembers of its recent writes of one copy.
type WriteHistory struct {
	// Desired is the Digest of the content last written.
	Desired string
	// Writes are the times that content was written within the policy's window, oldest
	// first.
	Writes []time.Time
	// Changed lists what the cluster changed in the last write (Changes between what was
	// written and what the write stored); empty when it was stored as written.
	Changed []string
	// Holds counts the holds in a row, for the backoff.
	Holds int
	// HeldUntil ends the current hold; Reason says why the copy is held.
	HeldUntil time.Time
	Reason    string
	// Rejected is set when the local API server refused the Desired content for a reason
	// a retry does not cure (an immutable field); it says why. Such content is not written
	// again until it changes (or MaxHold has passed).
	Rejected string
	// RejectedReason is the condition reason of Rejected (e.g. ImmutableField).
	RejectedReason string
}

// SettleInput is what Settle decides from.
type SettleInput struct {
	History WriteHistory
	// Desired is the Digest of the copy Decide asks to write.
	Desired string
	// Missing is true when there is no observed object (Decide asks for a create).
	Missing bool
	// Drift is Changes from the desired copy to the observed one: what someone else
	// changed.
	Drift  []string
	Now    time.Time
	Policy SettlePolicy
}

// Verdict is Settle's answer.
type Verdict struct {
	// Hold is true when the copy must not be written now.
	Hold bool
	// Until is when the copy is written again (once) at the latest.
	Until time.Time
	// Started is true when this verdict starts the hold.
	Started bool
	// Reason says why the copy is held.
	Reason string
	// Rejected is true when the copy is held because the API server refused its content
	// (WriteHistory.Rejected); RejectedReason is the condition reason.
	Rejected       bool
	RejectedReason string
}

// Settle decides whether the copy Decide asks to write is written now. It is pure. Its
// rules:
//   - new desired content (the source changed) is always written once;
//   - content the API server refused for good (Rejected) is not written again until it
//     changes, or for MaxHold;
//   - a copy under hold is not written until the hold ends;
//   - a copy whose last write the cluster changed on the way (admission, defaulting) is
//     held;
//   - a copy written MaxWrites times within Window with the same content (2 once it has
//     been held) is held;
//   - a hold lasts Hold, doubled for each hold in a row up to MaxHold, and consumes its
//     evidence: when it ends the copy is written once more.
//
// It returns the history to keep.
func Settle(in SettleInput) (WriteHistory, Verdict) {
	h, p := in.History, in.Policy
	if in.Desired != h.Desired {
		return h, Verdict{}
	}
	if h.Rejected != "" {
		if in.Now.Before(h.HeldUntil) {
			return h, Verdict{Hold: true, Until: h.HeldUntil, Reason: h.Rejected, Rejected: true, RejectedReason: h.RejectedReason}
		}
		h.Rejected, h.RejectedReason = "", "" // try once more
		return h, Verdict{}
	}
	if in.Now.Before(h.HeldUntil) {
		return h, Verdict{Hold: true, Until: h.HeldUntil, Reason: h.Reason}
	}
	h.Writes = recent(h.Writes, in.Now, p.Window)
	limit := p.MaxWrites
	if h.Holds > 0 {
		limit = min(2, limit)
	}
	var reason string
	switch {
	case len(h.Changed) > 0:
		reason = fmt.Sprintf("changed by the cluster on every write (%s): a mutating admission webhook or defaulting that the copy does not have", listPaths(h.Changed))
	case len(h.Writes) >= limit && in.Missing:
		reason = fmt.Sprintf("written %d times in %s with the same content and gone again after each write: something else deletes it", len(h.Writes), p.Window)
	case len(h.Writes) >= limit:
		what := ""
		if len(in.Drift) > 0 {
			what = " (" + listPaths(in.Drift) + ")"
		}
		reason = fmt.Sprintf("written %d times in %s with the same content and changed again after each write%s: another controller or a user writes it too", len(h.Writes), p.Window, what)
	default:
		return h, Verdict{}
	}
	d := holdFor(p, h.Holds)
	h.Holds++
	h.HeldUntil = in.Now.Add(d)
	h.Reason = fmt.Sprintf("%s; not rewritten for %s", reason, d)
	h.Writes, h.Changed = nil, nil
	return h, Verdict{Hold: true, Until: h.HeldUntil, Started: true, Reason: h.Reason}
}

// Written returns the history after a write of content desired at now, whose stored
// object differed from what was written by changed (nil when stored as written).
func (h WriteHistory) Written(desired string, changed []string, now time.Time, p SettlePolicy) WriteHistory {
	if desired != h.Desired {
		h.Desired, h.Writes = desired, nil
	}
	h.Writes = append(recent(h.Writes, now, p.Window), now)
	h.Changed = append([]string(nil), changed...)
	return h
}

// Refused returns the history after the API server refused content desired at now for
// a reason a retry does not cure: the content is held for MaxHold (or until it changes).
func (h WriteHistory) Refused(desired, reason, why string, now time.Time, p SettlePolicy) WriteHistory {
	if desired != h.Desired {
		h = WriteHistory{Desired: desired}
	}
	h.Rejected, h.RejectedReason = why, reason
	h.HeldUntil = now.Add(p.MaxHold)
	return h
}

// Forgettable reports whether the history holds nothing Settle still needs at now: no
// write within the window and no hold, or none for MaxHold after a hold.
func (h WriteHistory) Forgettable(now time.Time, p SettlePolicy) bool {
	last := h.HeldUntil
	if n := len(h.Writes); n > 0 && h.Writes[n-1].After(last) {
		last = h.Writes[n-1]
	}
	if h.Rejected != "" {
		return !now.Before(h.HeldUntil)
	}
	if h.Holds > 0 || len(h.Changed) > 0 {
		return now.Sub(last) > p.MaxHold
	}
	return now.Sub(last) > p.Window
}

// recent returns the times within window before now (a new slice).
func recent(times []time.Time, now time.Time, window time.Duration) []time.Time {
	var out []time.Time
	for _, t := range times {
		if now.Sub(t) < window {
			out = append(out, t)
		}
	}
	return out
}

func holdFor(p SettlePolicy, holds int) time.Duration {
	d := p.Hold
	for i := 0; i < holds && d < p.MaxHold; i++ {
		d *= 2
	}
	if p.MaxHold > 0 && d > p.MaxHold {
		d = p.MaxHold
	}
	return d
}

func listPaths(paths []string) string {
	const max = 3
	if len(paths) > max {
		return strings.Join(paths[:max], ", ") + fmt.Sprintf(" and %d more", len(paths)-max)
	}
	return strings.Join(paths, ", ")
}

// Digest identifies the content of a desired copy, as Equal compares it: labels,
// annotations and everything but metadata (and status, unless syncStatus).
func Digest(obj *unstructured.Unstructured, syncStatus bool) string {
	b, err := json.Marshal([]any{obj.GetLabels(), obj.GetAnnotations(), content(obj.Object, syncStatus)})
	if err != nil {
		// Unstructured content always marshals; fall back to a digest that changes.
		b = []byte(fmt.Sprintf("%#v", obj.Object))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Changes lists, sorted, where observed differs from desired as Equal sees it:
// "metadata.labels[k]", "metadata.annotations[k]" and dotted paths into the content
// ("data.x", "spec.template"). A missing value, null and an empty map or list are the
// same.
func Changes(desired, observed *unstructured.Unstructured, syncStatus bool) []string {
	var out []string
	for _, m := range []struct {
		name string
		a, b map[string]string
	}{{"labels", desired.GetLabels(), observed.GetLabels()}, {"annotations", desired.GetAnnotations(), observed.GetAnnotations()}} {
		for k, v := range m.a {
			if w, ok := m.b[k]; !ok || w != v {
				out = append(out, fmt.Sprintf("metadata.%s[%s]", m.name, k))
			}
		}
		for k := range m.b {
			if _, ok := m.a[k]; !ok {
				out = append(out, fmt.Sprintf("metadata.%s[%s]", m.name, k))
			}
		}
	}
	out = diffPaths(out, "", content(desired.Object, syncStatus), content(observed.Object, syncStatus))
	sort.Strings(out)
	return out
}

func diffPaths(out []string, prefix string, a, b map[string]any) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		av, bv := a[k], b[k]
		am, aok := av.(map[string]any)
		bm, bok := bv.(map[string]any)
		switch {
		case aok && bok:
			out = diffPaths(out, path, am, bm)
		case empty(av) && empty(bv):
		case !apiequality.Semantic.DeepEqual(av, bv):
			out = append(out, path)
		}
	}
	return out
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// TakesOver reports whether act changes the origin of the observed copy: an update from
// another origin than the one the copy is marked with (its origin no longer has it).
func TakesOver(act Action, observed *unstructured.Unstructured) bool {
	if act.Type != ActionUpdate || act.Source == nil || observed == nil {
		return false
	}
	return types.UID(observed.GetAnnotations()[v1alpha1.OwnershipAnnotation]) != act.Source.Origin
}

// RuleWhy says why the copy is written by chosen's rule and not by other's (a rule that
// matches the same object from the same origin): what a losing rule's status and
// sync-diff report.
func RuleWhy(chosen, other Candidate) string {
	made := func(c Candidate) string {
		switch c.RuleRank() {
		case RankLocal:
			return "made in this cluster"
		case RankOrigin:
			return "made on the object's origin " + string(c.Origin)
		}
		return "made on cluster " + string(c.RuleOrigin)
	}
	switch {
	case other.RuleRank() != chosen.RuleRank():
		return fmt.Sprintf("rule %s (%s) writes it before rule %s (%s): a rule made here, then one made on the object's origin, comes before a third member's",
			chosen.Rule, made(chosen), other.Rule, made(other))
	case Less(other, chosen):
		return fmt.Sprintf("the copy keeps rule %s, which wrote it; rule %s (%s) matches it too", chosen.Rule, other.Rule, made(other))
	case chosen.RuleRank() == RankThird && !chosen.RuleSince.Equal(other.RuleSince):
		return fmt.Sprintf("rule %s (%s) reached this cluster before rule %s (%s): among other members' rules the first writes it",
			chosen.Rule, made(chosen), other.Rule, made(other))
	case other.RuleOrigin != chosen.RuleOrigin:
		return fmt.Sprintf("rule %s (%s) writes it: its cluster ID sorts before that of cluster %s, where rule %s was made", chosen.Rule, made(chosen), other.RuleOrigin, other.Rule)
	}
	return fmt.Sprintf("rule %s sorts before rule %s", chosen.Rule, other.Rule)
}

// Passed is a candidate the copy does not follow, and why.
type Passed struct {
	Candidate
	// Why says why the chosen candidate is followed instead.
	Why string
}

// Explain says which candidate act follows and why, and lists the other candidates of in
// with the reason each is passed over, in the order of Less: what sync-diff shows. why is
// empty when act follows no candidate (a delete, or nothing to do).
func Explain(in Input, act Action) (why string, passed []Passed) {
	chosen := act.Source
	if chosen == nil {
		return "", nil
	}
	origins := map[types.UID]bool{}
	for _, c := range in.Candidates {
		origins[c.Origin] = true
	}
	mark := types.UID("")
	if in.Observed != nil {
		mark = types.UID(in.Observed.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	}
	following := mark != "" && mark == chosen.Origin && mark != in.LocalID
	first := Choose(in.Candidates)
	switch {
	case following && first != nil && first.Origin != chosen.Origin:
		why = fmt.Sprintf("the copy keeps following its origin %s, which still has it (a copy changes origin only when its origin no longer has the object)", chosen.Origin)
	case mark != "" && mark != chosen.Origin && mark != in.LocalID && in.OriginGone[mark] && len(origins) > 1:
		why = fmt.Sprintf("the copy's origin %s no longer has it; %s has the lowest cluster ID of the %d origins that do", mark, chosen.Origin, len(origins))
	case mark != "" && mark != chosen.Origin && mark != in.LocalID && in.OriginGone[mark]:
		why = fmt.Sprintf("the copy's origin %s no longer has it; %s is the only origin that does", mark, chosen.Origin)
	case len(origins) > 1:
		why = fmt.Sprintf("origin %s has the lowest cluster ID of the %d origins that have it", chosen.Origin, len(origins))
	default:
		why = fmt.Sprintf("origin %s is the only origin that has it", chosen.Origin)
	}
	skipped := false
	for _, c := range Rank(in.Candidates) {
		if !skipped && c.Origin == chosen.Origin && c.PeerID == chosen.PeerID && c.Rule == chosen.Rule && c.Peer == chosen.Peer {
			skipped = true // the chosen one
			continue
		}
		var reason string
		switch {
		case c.Origin != chosen.Origin && Less(c, *chosen):
			// Decide chooses a candidate of a later origin only for a copy of that origin.
			reason = fmt.Sprintf("the copy keeps following its origin %s, which still has it", chosen.Origin)
		case c.Origin != chosen.Origin:
			reason = fmt.Sprintf("origin %s has a higher cluster ID than %s", c.Origin, chosen.Origin)
		case chosen.PeerID == chosen.Origin && c.PeerID != c.Origin:
			reason = fmt.Sprintf("a copy of origin %s read through %s: the origin itself is read", c.Origin, c.Peer)
		case c.Rule != chosen.Rule:
			reason = RuleWhy(*chosen, c)
		default:
			reason = fmt.Sprintf("read through %s, whose cluster ID sorts after %s's", c.Peer, chosen.Peer)
		}
		passed = append(passed, Passed{Candidate: c, Why: reason})
	}
	return why, passed
}
