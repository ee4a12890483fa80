package syncdiff

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

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

type target struct {
	gvk schema.GroupVersionKind
	key types.NamespacedName
}

// ruleSet returns the rules the controller of the local cluster runs: its
// ResourceSyncRules with the previewed ones replacing or joining them, and the built-in
// rule. Invalid rules are left out, as the engine leaves them out, with a warning.
func (p *differ) ruleSet(ctx context.Context, res *result) []planner.Rule {
	byName := map[string]*v1alpha1.ResourceSyncRule{}
	for i := range p.local.Rules {
		byName[p.local.Rules[i].Name] = &p.local.Rules[i]
	}
	for _, r := range p.preview {
		byName[r.Name] = r
	}
	core := planner.CoreRule()
	byName[core.Name] = core
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []planner.Rule
	for _, n := range names {
		rsr := byName[n]
		if slices.Contains(p.deleting, n) {
			rsr = rsr.DeepCopy()
			now := metav1.Now()
			rsr.DeletionTimestamp = &now // as the engine sees a rule being deleted
		}
		compiled, err := planner.CompileRule(rsr)
		if err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: rule %s is invalid and is not run: %v", p.local.Name(), n, err))
			continue
		}
		policy, _ := p.policy(ctx) // RuleAllowed reads no namespace label
		if ref := policy.RuleAllowed(rsr, compiled); ref != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: rule %s does not run here (%s): %s", p.local.Name(), n, ref.Reason, ref.Message))
		}
		out = append(out, planner.Rule{Spec: rsr, Compiled: compiled})
	}
	return out
}

// sources returns the peers the local controller reads: its Cluster CRs other than its
// own, but disabled ones, each read through the context that maps to its cluster ID.
func (p *differ) sources(ctx context.Context, res *result) []planner.Source {
	var out []planner.Source
	clusters := p.clusters()
	for i := range clusters {
		c := &clusters[i]
		if c.Spec.ClusterID == p.local.ID || c.Annotations[v1alpha1.ClusterDisabledAnnotation] == "true" {
			continue
		}
		clusterMap, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
		src := planner.Source{Name: c.Name, ClusterID: c.Spec.ClusterID, Cluster: clusterMap}
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
			src.Lookup = func(gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, bool) {
				return v.lookup(ctx, gvk, ns, name)
			}
		}
		if src.Lookup == nil {
			src.Lookup = func(schema.GroupVersionKind, string, string) (*unstructured.Unstructured, bool) { return nil, false }
		}
		out = append(out, src)
	}
	return out
}

func joinKey(k types.NamespacedName) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.String()
}

func orAll(nss []string) []string {
	if len(nss) == 0 {
		return []string{""}
	}
	return nss
}

// rsrGVK is the kind of ResourceSyncRules, which the built-in rule syncs.
var rsrGVK = v1alpha1.GroupVersion.WithKind("ResourceSyncRule")

// plan computes what the controller of the local cluster would do: for every local
// object a rule may write (every target of a matching source object, and every local
// copy a rule wrote), planner.Gather and planner.Decide, exactly as the engine calls them.
//
// The rules are planned first: the ResourceSyncRules the built-in rule would create,
// update or delete here are the rules this cluster's controller runs once it has written
// them, so the plan of every other object uses them. A rule applied on one member then
// shows its effect on every member, as the controllers reach it.
func (p *differ) plan(ctx context.Context) result {
	var res result
	ruleSet := p.ruleSet(ctx, &res)
	sources := p.sources(ctx, &res)
	var localCluster map[string]any
	if c := p.local.localCluster(); c != nil {
		localCluster, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("cluster %s (context %s) has no local Cluster CR: its controller has not bootstrapped it", p.local.Name(), p.local.Context))
	}
	var first result // its warnings come again in the second pass
	ruleItems := p.items(ctx, &first, ruleSet, sources, localCluster, func(gvk schema.GroupVersionKind) bool { return gvk == rsrGVK })
	ruleSet = p.withRuleCopies(ruleSet, ruleItems, &res)
	res.Items = p.items(ctx, &res, ruleSet, sources, localCluster, nil)
	res.Items = append(res.Items, p.deletedRuleItems(ctx, &res, ruleSet, sources, localCluster)...)
	p.checkGrants(ctx, &res)
	return res
}

// deletedRuleItems are the copies the controller deletes for rules being deleted (or
// previewed as deleted with --deleting) whose deletionPolicy is Delete: every local
// object the rule wrote (labelled with its name and marked with an origin) that no other
// rule asks for (planner.KeepOnRuleDelete), as the engine's finalizer deletes them; a
// copy another rule asks for is that rule's update in the plan. Copies of a rule with
// deletionPolicy Retain stay.
func (p *differ) deletedRuleItems(ctx context.Context, res *result, ruleSet []planner.Rule, sources []planner.Source, localCluster map[string]any) []Item {
	var out []Item
	for _, r := range ruleSet {
		if r.Spec.DeletionTimestamp == nil || r.Spec.Name == v1alpha1.CoreRuleName {
			continue
		}
		if r.Spec.Spec.DeletionPolicy != v1alpha1.DeletionPolicyDelete {
			res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: rule %s is deleted with deletionPolicy Retain: its copies stay", p.local.Name(), r.Spec.Name))
			continue
		}
		for _, gvk := range r.Compiled.TargetGVKs {
			l := p.local.objects(ctx, gvk, "")
			if l.err != nil {
				res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: rule %s: %v", p.local.Name(), r.Spec.Name, l.err))
				continue
			}
			for i := range l.objs {
				o := &l.objs[i]
				if o.GetLabels()[v1alpha1.RuleLabel] != r.Spec.Name || o.GetAnnotations()[v1alpha1.OwnershipAnnotation] == "" {
					continue
				}
				t := target{gvk, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}
				policy, err := p.policy(ctx)
				if err != nil {
					res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: rule %s: %v", p.local.Name(), r.Spec.Name, err))
					continue
				}
				g := planner.Gather(p.local.ID, localCluster, policy, ruleSet, sources, gvk, t.key, o)
				switch keep, wait := planner.KeepOnRuleDelete(o, g); {
				case keep:
					continue // another rule takes it over: its update is in the plan
				case wait:
					res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: rule %s is deleted with deletionPolicy Delete, but whether another rule keeps %s %s cannot be told: its origin is not read", p.local.Name(), r.Spec.Name, gvk.Kind, joinKey(t.key)))
					continue
				}
				it := p.item(r.Spec.Name, string(planner.ActionDelete), t, fmt.Sprintf("rule %s is deleted with deletionPolicy Delete", r.Spec.Name))
				it.live = o
				it.Origin = types.UID(o.GetAnnotations()[v1alpha1.OwnershipAnnotation])
				out = append(out, it)
			}
		}
	}
	return out
}

// withRuleCopies returns the rules the local controller runs after it wrote the
// ResourceSyncRules of items: created and updated rules replace or join ruleSet, deleted
// ones leave it. Previewed rules (-f) and the built-in rule stay as they are.
func (p *differ) withRuleCopies(ruleSet []planner.Rule, items []Item, res *result) []planner.Rule {
	byName := map[string]planner.Rule{}
	for _, r := range ruleSet {
		byName[r.Spec.Name] = r
	}
	keep := map[string]bool{v1alpha1.CoreRuleName: true}
	for _, r := range p.preview {
		keep[r.Name] = true
	}
	changed := false
	for _, it := range items {
		if it.Kind != rsrGVK.Kind || it.APIVersion != rsrGVK.GroupVersion().String() || keep[it.Name] {
			continue
		}
		switch it.Action {
		case string(planner.ActionCreate), string(planner.ActionUpdate):
			var rsr v1alpha1.ResourceSyncRule
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(it.Object.Object, &rsr); err != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: the copy of rule %s cannot be read: %v", p.local.Name(), it.Name, err))
				continue
			}
			compiled, err := planner.CompileRule(&rsr)
			if err != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: rule %s, copied from %s, is invalid and is not run: %v", p.local.Name(), it.Name, it.From, err))
				delete(byName, it.Name)
			} else {
				byName[it.Name] = planner.Rule{Spec: &rsr, Compiled: compiled}
			}
			changed = true
		case string(planner.ActionDelete):
			delete(byName, it.Name)
			changed = true
		}
	}
	if !changed {
		return ruleSet
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]planner.Rule, 0, len(names))
	for _, n := range names {
		out = append(out, byName[n])
	}
	return out
}

// items plans every local object of ruleSet whose kind passes only (nil for all).
func (p *differ) items(ctx context.Context, res *result, ruleSet []planner.Rule, sources []planner.Source, localCluster map[string]any, only func(schema.GroupVersionKind) bool) []Item {
	var out []Item
	fail := func(rule string, t target, reason string) {
		out = append(out, p.item(rule, string(ActionFailed), t, reason))
	}
	add := func(t target) bool { return only == nil || only(t.gvk) }

	targets := map[target]bool{}
	for _, r := range ruleSet {
		if r.Spec.DeletionTimestamp != nil {
			continue
		}
		// What the sources have.
		srcNS, _ := r.Compiled.SourceNamespaces()
		for _, s := range sources {
			if !s.Readable || !r.Compiled.Sources(s.Features) {
				continue
			}
			v := p.byID[s.ClusterID]
			for _, ns := range orAll(srcNS) {
				l := v.objects(ctx, r.Compiled.GVK, ns)
				if l.err != nil {
					res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: rule %s: %v", p.local.Name(), r.Spec.Name, l.err))
					continue
				}
				for i := range l.objs {
					tg, ok := planner.TargetOf(r.Compiled, p.local.ID, &l.objs[i])
					if t := (target{tg.GVK, tg.Key}); ok && add(t) {
						targets[t] = true
					}
				}
			}
		}
		// The copies the local cluster has: possible deletes.
		for _, gvk := range r.Compiled.TargetGVKs {
			for _, ns := range orAll(planner.LocalNamespaces(r.Spec, r.Compiled)) {
				l := p.local.objects(ctx, gvk, ns)
				if l.err != nil {
					res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: rule %s: %v", p.local.Name(), r.Spec.Name, l.err))
					continue
				}
				for i := range l.objs {
					o := &l.objs[i]
					if o.GetAnnotations()[v1alpha1.OwnershipAnnotation] != "" {
						if t := (target{gvk, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}); add(t) {
							targets[t] = true
						}
					}
				}
			}
		}
	}

	sorted := make([]target, 0, len(targets))
	for t := range targets {
		sorted = append(sorted, t)
	}
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.gvk.String() != b.gvk.String() {
			return a.gvk.String() < b.gvk.String()
		}
		if a.key.Namespace != b.key.Namespace {
			return a.key.Namespace < b.key.Namespace
		}
		return a.key.Name < b.key.Name
	})
	for _, t := range sorted {
		observed, ok := p.local.lookup(ctx, t.gvk, t.key.Namespace, t.key.Name)
		if !ok {
			fail("", t, fmt.Sprintf("cannot list %s in cluster %s", t.gvk.Kind, p.local.Name()))
			continue
		}
		if observed != nil && planner.MembershipObject(observed) {
			continue // the membership sync's, never the engine's
		}
		policy, err := p.policy(ctx)
		if err != nil {
			fail("", t, fmt.Sprintf("cannot list the Namespaces of cluster %s, whose Pod Security labels the policy reads: %v", p.local.Name(), err))
			continue
		}
		g := planner.Gather(p.local.ID, localCluster, policy, ruleSet, sources, t.gvk, t.key, observed)
		failed := false
		failing := make([]string, 0, len(g.Failures))
		for rule := range g.Failures {
			failing = append(failing, rule)
		}
		sort.Strings(failing)
		for _, rule := range failing {
			for _, f := range g.Failures[rule] {
				fail(rule, t, f)
				failed = true
			}
		}
		refused := make([]string, 0, len(g.Refusals))
		for rule := range g.Refusals {
			refused = append(refused, rule)
		}
		sort.Strings(refused)
		for _, rule := range refused {
			for _, r := range g.Refusals[rule] {
				fail(rule, t, "refused here ("+r.Reason+"): "+r.Message)
				failed = true
			}
		}
		act := planner.Decide(g.Input(p.local.ID, observed))
		if act.Type == planner.ActionNone && act.Withheld == "" && (failed || observed == nil) {
			continue // nothing there and nothing to write: not an object of the plan
		}
		out = append(out, p.actionItem(ctx, ruleSet, t, observed, g, act))
	}
	return out
}

func (p *differ) item(rule, action string, t target, reason string) Item {
	return Item{Cluster: p.local.Name(), Context: p.local.Context, Rule: rule, Action: action,
		APIVersion: t.gvk.GroupVersion().String(), Kind: t.gvk.Kind, Namespace: t.key.Namespace, Name: t.key.Name, Reason: reason}
}

// actionItem turns Decide's action into a plan item. The drift a ReportOnly rule
// withholds is shown as the write it would be, with the reason saying it is not made;
// what a CreateOnly rule leaves to the cluster is not a difference.
func (p *differ) actionItem(ctx context.Context, ruleSet []planner.Rule, t target, observed *unstructured.Unstructured, g planner.Gathered, act planner.Action) Item {
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
	if act.Type == planner.ActionCreate && t.key.Namespace != "" {
		// The engine creates a missing namespace only when the rule allows it.
		nsGVK := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
		if ns, ok := p.local.lookup(ctx, nsGVK, "", t.key.Namespace); ok && ns == nil {
			create := false
			for _, r := range ruleSet {
				if r.Spec.Name == rule {
					create = r.Spec.Spec.CreateNamespaces
				}
			}
			if create {
				it.Reason = fmt.Sprintf("namespace %s is created too", t.key.Namespace)
			} else {
				it.Action = ActionFailed
				it.Reason = fmt.Sprintf("namespace %s does not exist in this cluster: create it, or set spec.createNamespaces on the rule", t.key.Namespace)
			}
		}
	}
	return it
}
