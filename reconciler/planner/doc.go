// Package planner is the pure planner of the resource sync, shared by the controller's
// engine and by `kubectl registry sync-diff`: from what one cluster sees (the rules, the
// local policy, the candidate copies of an object from every source and the local object)
// it decides, for one object key, what to do (create, update, delete, keep or refuse) and
// why. It does no I/O and links no controller machinery (the layering test holds it to
// apimachinery, the API types and our API, see cmd/kubectl-registry/layering_test.go).
//
// Split by concern: snapshot.go (Snapshot: one cluster as its controller sees it, and the
// questions both the engine and sync-diff ask of it, PlanKey and OnRuleDelete),
// ruleset.go (AssembleRules: the rules a controller runs, under the cap on rules),
// cluster.go (PlanCluster: every object of one cluster, as sync-diff plans it), gather.go
// (Gather: the candidates of one key from the sources, under the rules and the policy),
// plan.go (Decide: the action for one key; Choose and Rank: the
// origin, the candidate with the lowest cluster ID; Settle: whether to write a copy
// someone else keeps changing or hold it, backing off), policy.go (the local SyncPolicy:
// what this cluster accepts), podsecurity.go (the Pod Security Standards a copy's pod
// template is held to), rules.go (the rules compiled as the engine runs them, and the
// built-in rule for rules), fields.go (the fields an API server or a local controller
// assigns, kept on a copy) and errors.go (write failures, classified). The membership
// (Cluster CRs and reader Secrets) is planned by the subpackage members.
package planner
