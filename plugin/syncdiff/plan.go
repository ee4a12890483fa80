package syncdiff

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// Actions of a plan item besides engine's create, update, delete, conflict and none.
const (
	// ActionFailed is an object the controller would fail on: a mutation error, a
	// missing namespace it may not create, a kind it cannot list.
	ActionFailed = "failed"
)

// Item is one object of the plan: what the controller of Cluster would do to it.
type Item struct {
	// Cluster is the diffed cluster (its Cluster CR's name) and Context its context.
	Cluster string `json:"cluster"`
	Context string `json:"context"`
	// Rule is the ResourceSyncRule the action comes from; Membership is set instead on
	// the Clusters and reader Secrets of the membership sync (--membership).
	Rule       string `json:"rule,omitempty"`
	Membership bool   `json:"membership,omitempty"`
	// Action is create, update, delete, conflict, failed or none; a membership write
	// has the op of members.Plan (create, update, replace, delete...).
	Action string `json:"action"`
	// APIVersion, Kind, Namespace and Name identify the local object.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Reason     string `json:"reason,omitempty"`
	// From is the source peer of a create or update, Origin the cluster ID the object
	// comes from.
	From   string    `json:"from,omitempty"`
	Origin types.UID `json:"origin,omitempty"`
	// Why says why the object follows Origin: the lowest cluster ID of the origins that
	// offer it, or the copy's own origin (planner.Explain).
	Why string `json:"why,omitempty"`
	// Losing are the other sources that offer the object, which it does not follow.
	Losing []Losing `json:"losing,omitempty"`
	// Object is the desired object of a create or update.
	Object *unstructured.Unstructured `json:"object,omitempty"`

	// live is the local object; syncStatus says the status is part of the copy.
	live       *unstructured.Unstructured
	syncStatus bool
}

// Losing is a source that offers an object which follows another: its peer, the origin
// its copy comes from, the rule, and why it is not followed.
type Losing struct {
	From   string    `json:"from"`
	Origin types.UID `json:"origin"`
	Rule   string    `json:"rule"`
	Why    string    `json:"why"`
}

// difference reports whether the item is a change (or a failure) rather than an
// unchanged object.
func (it Item) difference() bool { return it.Action != string(planner.ActionNone) }

// differ computes the plan of one cluster with the engine's own functions.
type differ struct {
	// local is the diffed cluster.
	local *view
	// byID holds every cluster read, by cluster ID.
	byID map[types.UID]*view
	// preview holds the rules of -f: they replace or join every cluster's rules.
	preview []*v1alpha1.ResourceSyncRule
	// unreadable are the contexts that could not be read (their cluster ID is unknown).
	unreadable []string
	// namespace is the registry namespace (--namespace), whose objects rules never write.
	namespace string
	// deleting are the rules previewed as deleted (--deleting).
	deleting []string
	// maxRules is the controllers' --max-rules (planner.DefaultMaxRules when 0).
	maxRules int
	// afterMembership are the local Clusters once the membership sync has made its
	// writes (set by membership, with --membership): the rules are planned on them, as
	// the controller's rules run once its membership sync has written them. Nil: the
	// local cluster's Clusters as they are.
	afterMembership []v1alpha1.Cluster
}

// clusters are the local Clusters the rules are planned with: after the membership
// writes with --membership, else as they are.
func (p *differ) clusters() []v1alpha1.Cluster {
	if p.afterMembership != nil {
		return p.afterMembership
	}
	return p.local.Clusters
}

// policy is this cluster's policy for the rules (the view's, over p.clusters()).
func (p *differ) policy(ctx context.Context) (planner.Policy, error) {
	return p.local.policy(ctx, p.namespace, p.clusters())
}

// result is the plan of one cluster. Warnings say the plan may be incomplete (a peer or
// a kind that could not be read); notes are worth knowing but change nothing.
type result struct {
	Items    []Item
	Warnings []string
	Notes    []string
}

// ruleSet returns the rules the controller of the local cluster runs
// (planner.AssembleRules, as the engine assembles them): its ResourceSyncRules with the
// previewed ones replacing or joining them, those previewed as deleted marked so, the
// first maxRules by name, and the built-in rule. Invalid rules and rules past the cap are
// left out, as the engine leaves them out, with a note.
func (p *differ) ruleSet(res *result, policy planner.Policy) []planner.Rule {
	byName := map[string]*v1alpha1.ResourceSyncRule{}
	for i := range p.local.Rules {
		byName[p.local.Rules[i].Name] = &p.local.Rules[i]
	}
	for _, r := range p.preview {
		byName[r.Name] = r
	}
	specs := make([]*v1alpha1.ResourceSyncRule, 0, len(byName))
	for n, rsr := range byName {
		if slices.Contains(p.deleting, n) {
			rsr = rsr.DeepCopy()
			now := metav1.Now()
			rsr.DeletionTimestamp = &now // as the engine sees a rule being deleted
		}
		specs = append(specs, rsr)
	}
	maxRules := p.maxRules
	if maxRules <= 0 {
		maxRules = planner.DefaultMaxRules
	}
	states := planner.AssembleRules(specs, maxRules, nil)
	for _, st := range states {
		n := st.Spec.Name
		switch {
		case st.Capped():
			res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: rule %s does not run: its controller runs at most %d rules (--max-rules), the first by name", p.local.Name(), n, maxRules))
		case st.Err != nil:
			res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: rule %s is invalid and is not run: %v", p.local.Name(), n, st.Err))
		default:
			if ref := policy.RuleAllowed(st.Spec, st.Compiled); ref != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: rule %s does not run here (%s): %s", p.local.Name(), n, ref.Reason, ref.Message))
			}
		}
	}
	return planner.Running(states)
}

// sources returns the peers the local controller reads (planner.IsSource: its Cluster
// CRs other than its own, but disabled ones), each read through the context that maps to
// its cluster ID, and the views of those that can be read.
func (p *differ) sources(ctx context.Context, res *result) ([]planner.Source, map[types.UID]planner.View) {
	var out []planner.Source
	views := map[types.UID]planner.View{}
	clusters := p.clusters()
	for i := range clusters {
		c := &clusters[i]
		if !planner.IsSource(p.local.ID, c) {
			continue
		}
		src := planner.Source{Name: c.Name, ClusterID: c.Spec.ClusterID, Cluster: sync.OnceValue(func() map[string]any {
			m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
			return m
		})}
		v := p.byID[c.Spec.ClusterID]
		switch {
		case v == nil && len(p.unreadable) > 0:
			res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: its peer %s (cluster ID %s) is reached by none of the contexts that could be read (not read: %s): what it would sync is not shown", p.local.Name(), c.Name, c.Spec.ClusterID, strings.Join(p.unreadable, ", ")))
		case v == nil:
			res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: its peer %s (cluster ID %s) is reached by none of the contexts read (list its context in --contexts): what it would sync is not shown", p.local.Name(), c.Name, c.Spec.ClusterID))
		case v.Err != nil:
			res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: its peer %s cannot be read (context %s): what it would sync is not shown", p.local.Name(), c.Name, v.Context))
		case c.Status.State != "" && c.Status.State != v1alpha1.ClusterStateReady:
			// The controller reads its peers with their reader tokens, not with your
			// contexts: it sees what the Cluster's status says.
			res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: its controller cannot read its peer %s (state %s: %s): it syncs nothing from it and deletes nothing of it until it can",
				p.local.Name(), c.Name, c.Status.State, c.Status.Message))
		default:
			src.Readable = true
			src.Features = v.Features
			pv := v.at(ctx)
			views[c.Spec.ClusterID] = pv
			src.Lookup = pv.Get
		}
		if src.Lookup == nil {
			src.Lookup = func(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, bool) { return nil, false }
		}
		out = append(out, src)
	}
	return out, views
}

// plan computes what the controller of the local cluster would do: planner.PlanCluster
// of this cluster's snapshot, exactly the questions the engine asks of its own
// (planner.Snapshot.PlanKey and OnRuleDelete), then each answer as plan items.
func (p *differ) plan(ctx context.Context) result {
	var res result
	policy, policyErr := p.policy(ctx) // the policy without Pod Security levels when they cannot be read
	snap := planner.Snapshot{LocalID: p.local.ID, Policy: policy, Rules: p.ruleSet(&res, policy)}
	var views planner.Views
	snap.Sources, views.Peers = p.sources(ctx, &res)
	views.Local = p.local.at(ctx)
	if c := p.local.localCluster(); c != nil {
		snap.LocalCluster, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("cluster %s (context %s) has no local Cluster CR: its controller has not bootstrapped it", p.local.Name(), p.local.Context))
	}
	pinned := make([]string, 0, len(p.preview))
	for _, r := range p.preview {
		pinned = append(pinned, r.Name)
	}
	cp := planner.PlanCluster(snap, views, planner.PlanOptions{Pinned: pinned})
	for _, w := range cp.Warnings {
		res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: %s", p.local.Name(), w))
	}
	for _, n := range cp.Notes {
		res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: %s", p.local.Name(), n))
	}
	for _, pl := range cp.Planned {
		res.Items = append(res.Items, p.items(ctx, &res, cp.Rules, pl, policyErr)...)
	}
	p.checkGrants(ctx, &res)
	return res
}

// items turns one planned object into plan items: the failures and refusals of the rules
// that ask for it, and its action.
func (p *differ) items(ctx context.Context, res *result, ruleSet []planner.Rule, pl planner.Planned, policyErr error) []Item {
	t := pl.Target
	switch {
	case pl.DeletedRule != "" && policyErr != nil:
		res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: rule %s: %v", p.local.Name(), pl.DeletedRule, policyErr))
		return nil
	case pl.DeletedRule != "":
		it := p.item(pl.DeletedRule, string(planner.ActionDelete), t, fmt.Sprintf("rule %s is deleted with deletionPolicy Delete", pl.DeletedRule))
		it.live = pl.Observed
		it.Origin = types.UID(pl.Observed.GetAnnotations()[v1alpha1.OwnershipAnnotation])
		return []Item{it}
	case pl.Unlisted:
		return []Item{p.item("", ActionFailed, t, fmt.Sprintf("cannot list %s in cluster %s", t.GVK.Kind, p.local.Name()))}
	case pl.Plan.Membership:
		return nil // the membership sync's, never the engine's
	case policyErr != nil:
		return []Item{p.item("", ActionFailed, t, fmt.Sprintf("cannot list the Namespaces of cluster %s, whose Pod Security labels the policy reads: %v", p.local.Name(), policyErr))}
	}
	var out []Item
	g := pl.Plan.Gathered
	for _, rule := range slices.Sorted(maps.Keys(g.Failures)) {
		for _, f := range g.Failures[rule] {
			out = append(out, p.item(rule, ActionFailed, t, f))
		}
	}
	for _, rule := range slices.Sorted(maps.Keys(g.Refusals)) {
		for _, r := range g.Refusals[rule] {
			out = append(out, p.item(rule, ActionFailed, t, "refused here ("+r.Reason+"): "+r.Message))
		}
	}
	act := pl.Plan.Action
	if act.Type == planner.ActionNone && act.Withheld == "" && (len(out) > 0 || pl.Observed == nil) {
		return out // nothing there and nothing to write: not an object of the plan
	}
	return append(out, p.actionItem(ctx, ruleSet, t, pl.Observed, g, act))
}

func (p *differ) item(rule, action string, t planner.Target, reason string) Item {
	return Item{Cluster: p.local.Name(), Context: p.local.Context, Rule: rule, Action: action,
		APIVersion: t.GVK.GroupVersion().String(), Kind: t.GVK.Kind, Namespace: t.Key.Namespace, Name: t.Key.Name, Reason: reason}
}

// actionItem turns Decide's action into a plan item. The drift a ReportOnly rule
// withholds is shown as the write it would be, with the reason saying it is not made;
// what a CreateOnly rule leaves to the cluster is not a difference.
func (p *differ) actionItem(ctx context.Context, ruleSet []planner.Rule, t planner.Target, observed *unstructured.Unstructured, g planner.Gathered, act planner.Action) Item {
	if act.Withheld != "" {
		if g.Modes[act.Rule()] == v1alpha1.SyncModeReportOnly {
			act.Type = act.Withheld
		} else {
			act.Object = nil
		}
	}
	rule := ""
	switch {
	case act.Source != nil:
		rule = act.Source.Rule
	case act.Type == planner.ActionDelete:
		rule = act.Object.GetLabels()[v1alpha1.RuleLabel]
	default:
		if c := planner.Choose(g.Candidates); c != nil {
			rule = c.Rule
		} else if observed != nil {
			rule = observed.GetLabels()[v1alpha1.RuleLabel]
		}
	}
	it := p.item(rule, string(act.Type), t, act.Reason)
	it.live = observed
	if c := act.Source; c != nil || act.Type == planner.ActionNone {
		if c == nil {
			c = planner.Choose(g.Candidates)
		}
		if c != nil {
			it.From, it.Origin, it.syncStatus = c.Peer, c.Origin, c.SyncStatus
		}
	}
	why, passed := planner.Explain(g.Input(p.local.ID, observed), act)
	it.Why = why
	for _, c := range passed {
		it.Losing = append(it.Losing, Losing{From: c.Peer, Origin: c.Origin, Rule: c.Rule, Why: c.Why})
	}
	if it.Origin == "" && observed != nil {
		it.Origin = types.UID(observed.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	}
	switch act.Type {
	case planner.ActionCreate, planner.ActionUpdate:
		it.Object = act.Object
	}
	if act.Type == planner.ActionCreate && t.Key.Namespace != "" {
		// The engine creates a missing namespace only when the rule allows it.
		nsGVK := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
		if ns, ok := p.local.lookup(ctx, nsGVK, "", t.Key.Namespace); ok && ns == nil {
			create := false
			for _, r := range ruleSet {
				if r.Spec.Name == rule {
					create = r.Spec.Spec.CreateNamespaces
				}
			}
			if create {
				it.Reason = fmt.Sprintf("namespace %s is created too", t.Key.Namespace)
			} else {
				it.Action = ActionFailed
				it.Reason = fmt.Sprintf("namespace %s does not exist in this cluster: create it, or set spec.createNamespaces on the rule", t.Key.Namespace)
			}
		}
	}
	return it
}
