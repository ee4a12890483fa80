// Package engine is the ResourceSyncRule sync engine: for every rule it pulls the
// matching objects of the rule's kind from every peer that qualifies as a source and
// writes the mutated copies into the local cluster, and only there.
//
// One informer per (cluster, kind, namespace) serves every rule; events are coalesced per
// local object in a rate-limited work queue served by several workers. The decisions are
// pure and shared with the CLI: package rules matches and mutates, package planner plans
// (Snapshot, PlanKey, Settle). The safety rules are the planner's: an object without the
// ownership mark is never touched, and a copy is deleted only when its origin, seen
// through a healthy synced watch, no longer has it. ResourceSyncRules themselves travel
// through a built-in rule, unless they carry the resource-sync-disabled annotation.
//
// # The path of a peer event to its write
//
// The engine is views -> plan -> writer. One change of a peer's object goes:
//
//  1. views (informers.go, source.go, cached.go): the informer of the peer's scope,
//     started by doRefresh (peerviews.go) for the rules that read it, decodes the watch
//     event into a compact cachedObject and calls the engine's handler, onEvent.
//  2. queue.go: onEvent decodes what mapping the event to local objects needs
//     (onPeerEvent: planner.TargetOf) and queues each local object it may affect (add);
//     a worker takes it (processNext) and reconciles it.
//  3. reconcile.go: observe reads the local object from the local view; snapshotFor
//     builds the planner's Snapshot from the rules, the peers' views (their Lookup) and
//     this cluster's policy (policy.go); Snapshot.PlanKey plans the one action; write
//     waits for the views a create needs (origin.go), asks Settle (settle.go) and hands
//     the action to execute.
//  4. writes.go: execute resolves the identity the copy is written as and writes it
//     through package writer (the local cluster's clients per identity, the REST
//     mappings, the write records and the own-write tracking), then records the outcome
//     on the rule's rulestatus.Tracker; every two seconds status.go computes each rule's
//     status from it (rulestatus.Compute) and patches it (rulestatus.Writer).
//
// Steps 2 to 4 each call the next and return: queue.go, reconcile.go and writes.go call
// back into no file before them, nor do packages writer and rulestatus. The views do not
// yet: reconcile.go reads them again while it plans (observe's lookupCached and
// settledKey, the sources' Lookup in snapshotFor), and createCopy watches an object in
// the way of a copy (inTheWay), all in informers.go, so the path leaves informers.go at
// the event and comes back to it. Once the views are a package of their own (the last
// split below), those are calls into views, not returns to an engine file.
//
// # The split
//
//   - writer (reconciler/engine/writer): what executes a planned action against the local
//     cluster: a client per identity (the controller's own, a member's impersonated), the
//     REST mappings, the write of a copy through the REST client, the namespace a copy
//     needs, and what the engine remembers of its writes (the write records Settle reads,
//     the own writes not yet in the local cache). The engine calls it through copyWriter.
//   - rulestatus (reconciler/engine/rulestatus): what each rule knows of the objects it
//     covers (Tracker), its status and conditions computed from that and from its
//     sources (Compute, pure), the overlaps between rules, and the status patch (Writer,
//     which the engine calls through statusWriter). The engine keeps what reads its views
//     for the status (sourceStates, sourceError) and the deletion policy (finalize).
//   - the views (informers.go, cached.go, source.go, peerviews.go, objectcap.go) stay in
//     this package for now; they are the next subpackage (views) of issue #29: the
//     watchers and their scopes, the compact cachedObject and its decoding, the
//     clusters' clients and the cap on objects, behind what the engine asks of them
//     (ensure, lookup, lookupCached, covers, count, retain, overCapErr).
package engine
