package planner

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// View is a read-only view of one cluster's objects, as a whole-cluster plan reads it.
type View interface {
	// List returns the objects of a kind in a namespace ("" for every namespace, and for
	// cluster-scoped kinds), or why they cannot be read.
	List(gvk schema.GroupVersionKind, namespace string) ([]*unstructured.Unstructured, error)
	// Get returns the object of a kind at a key, nil when absent; ok is false when the
	// kind cannot be read (then absence proves nothing, as with an unsynced informer).
	Get(gvk schema.GroupVersionKind, namespace, name string) (obj *unstructured.Unstructured, ok bool)
}

// Views are the views a whole-cluster plan reads: the local cluster's, and each readable
// source's, by cluster ID.
type Views struct {
	Local View
	Peers map[types.UID]View
}

// Planned is one local object of a cluster's plan.
type Planned struct {
	Target Target
	// Observed is the local object, nil when absent.
	Observed *unstructured.Unstructured
	// Plan is what the controller does to it (PlanKey), with the failures and refusals
	// of the rules that ask for it. Unset on a deletion-policy delete and when Unlisted.
	Plan KeyPlan
	// DeletedRule names the rule, being deleted with deletionPolicy Delete, whose
	// deletion deletes this copy: no other rule asks for it.
	DeletedRule string
	// Unlisted is true when the local kind cannot be listed: nothing can be planned.
	Unlisted bool
}

// ClusterPlan is the plan of one cluster: every local object a rule may write.
type ClusterPlan struct {
	Planned []Planned
	// Rules are the rules the controller runs once it has written the rules the built-in
	// rule copies in (and those it deletes are gone): the rules Planned was planned with.
	Rules []Rule
	// Warnings say the plan may be incomplete (a kind that could not be read); Notes are
	// worth knowing but change nothing.
	Warnings, Notes []string
}

// PlanOptions tune a whole-cluster plan.
type PlanOptions struct {
	// Pinned are rules that rules copied in do not replace (sync-diff's previews).
	Pinned []string
}

// rsrGVK is the kind of ResourceSyncRules, which the built-in rule syncs.
var rsrGVK = v1alpha1.GroupVersion.WithKind("ResourceSyncRule")

// PlanCluster plans every local object of the cluster of s that a rule may write: every
// target of a matching source object, and every local copy a rule wrote (a possible
// delete), each with PlanKey, and the copies the deletion policy of rules being deleted
// deletes (OnRuleDelete). The rules are planned first: the ResourceSyncRules the built-in
// rule would create, update or delete here are the rules this cluster's controller runs
// once it has written them, so every other object is planned with them; a rule applied
// on one member shows its effect on every member, as the controllers reach it.
//
// The engine asks the same questions of the same snapshot, one key at a time as events
// come (PlanKey, OnRuleDelete); sync-diff asks them of every key at once.
func PlanCluster(s Snapshot, v Views, opts PlanOptions) ClusterPlan {
	var out ClusterPlan
	var first ClusterPlan // its warnings come again in the second pass
	rulePass := planKeys(s, v, &first, func(gvk schema.GroupVersionKind) bool { return gvk == rsrGVK })
	s.Rules = withRuleCopies(s.Rules, rulePass, opts.Pinned, &out)
	out.Rules = s.Rules
	out.Planned = planKeys(s, v, &out, nil)
	out.Planned = append(out.Planned, ruleDeletions(s, v, &out)...)
	return out
}

func orAll(nss []string) []string {
	if len(nss) == 0 {
		return []string{""}
	}
	return nss
}

// planKeys plans every local object of s's rules whose kind passes only (nil for all).
func planKeys(s Snapshot, v Views, out *ClusterPlan, only func(schema.GroupVersionKind) bool) []Planned {
	targets := map[Target]bool{}
	add := func(t Target) {
		if only == nil || only(t.GVK) {
			targets[t] = true
		}
	}
	for _, r := range s.Rules {
		if r.Spec.DeletionTimestamp != nil {
			continue
		}
		// What the sources have.
		srcNS, _ := r.Compiled.SourceNamespaces()
		for _, src := range s.Sources {
			pv := v.Peers[src.ClusterID]
			if !src.Readable || pv == nil || !r.Compiled.Sources(src.Features) {
				continue
			}
			for _, ns := range orAll(srcNS) {
				objs, err := pv.List(r.Compiled.GVK, ns)
				if err != nil {
					out.Warnings = append(out.Warnings, fmt.Sprintf("rule %s: %v", r.Spec.Name, err))
					continue
				}
				for _, o := range objs {
					if t, ok := TargetOf(r.Compiled, s.LocalID, o); ok {
						add(t)
					}
				}
			}
		}
		// The copies the local cluster has: possible deletes.
		for _, gvk := range r.Compiled.TargetGVKs {
			for _, ns := range orAll(LocalNamespaces(r.Spec, r.Compiled)) {
				objs, err := v.Local.List(gvk, ns)
				if err != nil {
					out.Warnings = append(out.Warnings, fmt.Sprintf("rule %s: %v", r.Spec.Name, err))
					continue
				}
				for _, o := range objs {
					if o.GetAnnotations()[v1alpha1.OwnershipAnnotation] != "" {
						add(Target{GVK: gvk, Key: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
					}
				}
			}
		}
	}
	sorted := make([]Target, 0, len(targets))
	for t := range targets {
		sorted = append(sorted, t)
	}
	sort.Slice(sorted, func(i, j int) bool { return targetLess(sorted[i], sorted[j]) })
	out2 := make([]Planned, 0, len(sorted))
	for _, t := range sorted {
		observed, ok := v.Local.Get(t.GVK, t.Key.Namespace, t.Key.Name)
		if !ok {
			out2 = append(out2, Planned{Target: t, Unlisted: true})
			continue
		}
		out2 = append(out2, Planned{Target: t, Observed: observed, Plan: s.PlanKey(t, observed)})
	}
	return out2
}

func targetLess(a, b Target) bool {
	if as, bs := a.GVK.String(), b.GVK.String(); as != bs {
		return as < bs
	}
	if a.Key.Namespace != b.Key.Namespace {
		return a.Key.Namespace < b.Key.Namespace
	}
	return a.Key.Name < b.Key.Name
}

// withRuleCopies returns the rules the local controller runs after it wrote the
// ResourceSyncRules of planned: created and updated rules replace or join ruleSet,
// deleted ones leave it. Pinned rules and the built-in rule stay as they are. (Rules
// past the cap on rules are not in ruleSet: a copy deleted here does not bring one in.)
func withRuleCopies(ruleSet []Rule, planned []Planned, pinned []string, out *ClusterPlan) []Rule {
	byName := map[string]Rule{}
	for _, r := range ruleSet {
		byName[r.Spec.Name] = r
	}
	keep := map[string]bool{v1alpha1.CoreRuleName: true}
	for _, n := range pinned {
		keep[n] = true
	}
	changed := false
	for _, p := range planned {
		name, act := p.Target.Key.Name, p.Plan.Action
		if p.Target.GVK != rsrGVK || keep[name] || p.Plan.Membership {
			continue
		}
		switch act.Type {
		case ActionCreate, ActionUpdate:
			var rsr v1alpha1.ResourceSyncRule
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(act.Object.Object, &rsr); err != nil {
				out.Notes = append(out.Notes, fmt.Sprintf("the copy of rule %s cannot be read: %v", name, err))
				continue
			}
			from := ""
			if act.Source != nil {
				from = act.Source.Peer
			}
			compiled, err := CompileRule(&rsr)
			if err != nil {
				out.Notes = append(out.Notes, fmt.Sprintf("rule %s, copied from %s, is invalid and is not run: %v", name, from, err))
				delete(byName, name)
			} else {
				byName[name] = Rule{Spec: &rsr, Compiled: compiled}
			}
			changed = true
		case ActionDelete:
			delete(byName, name)
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
	rules := make([]Rule, 0, len(names))
	for _, n := range names {
		rules = append(rules, byName[n])
	}
	return rules
}

// ruleDeletions are the copies the controller deletes for rules being deleted whose
// deletionPolicy is Delete: every local object the rule wrote (labelled with its name and
// marked with an origin) that no other rule asks for (OnRuleDelete), as the engine's
// finalizer deletes them; a copy another rule asks for is that rule's update in the plan.
// Copies of a rule with deletionPolicy Retain stay.
func ruleDeletions(s Snapshot, v Views, out *ClusterPlan) []Planned {
	var planned []Planned
	for _, r := range s.Rules {
		if r.Spec.DeletionTimestamp == nil || r.Spec.Name == v1alpha1.CoreRuleName {
			continue
		}
		if r.Spec.Spec.DeletionPolicy != v1alpha1.DeletionPolicyDelete {
			out.Notes = append(out.Notes, fmt.Sprintf("rule %s is deleted with deletionPolicy Retain: its copies stay", r.Spec.Name))
			continue
		}
		for _, gvk := range r.Compiled.TargetGVKs {
			objs, err := v.Local.List(gvk, "")
			if err != nil {
				out.Warnings = append(out.Warnings, fmt.Sprintf("rule %s: %v", r.Spec.Name, err))
				continue
			}
			for _, o := range objs {
				if o.GetLabels()[v1alpha1.RuleLabel] != r.Spec.Name || o.GetAnnotations()[v1alpha1.OwnershipAnnotation] == "" {
					continue
				}
				t := Target{GVK: gvk, Key: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}
				switch keep, wait := s.OnRuleDelete(t, o); {
				case keep:
					continue // another rule takes it over: its update is in the plan
				case wait:
					out.Warnings = append(out.Warnings, fmt.Sprintf("rule %s is deleted with deletionPolicy Delete, but whether another rule keeps %s %s cannot be told: its origin is not read",
						r.Spec.Name, gvk.Kind, joinKey(t.Key.Namespace, t.Key.Name)))
					continue
				}
				planned = append(planned, Planned{Target: t, Observed: o, DeletedRule: r.Spec.Name})
			}
		}
	}
	return planned
}
