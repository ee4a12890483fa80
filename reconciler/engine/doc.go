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
//  1. package views: the informer of the peer's scope, started by doRefresh
//     (peerviews.go) for the rules that read it, decodes the watch event into a compact
//     views.Cached and calls the engine's handler, onEvent.
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
// Each step calls the next and returns: the path leaves no engine file to come back to
// it. What reconcile.go and writes.go read of the views while they plan and write (the
// local object, observe's LookupCached; the sources' Lookup in snapshotFor; the watch of
// an object in the way of a copy, inTheWay in writes.go, and its end, settledKey in
// reconcile.go) are calls into package views through the engine's clusterViews
// interface, as the writes are calls into package writer through copyWriter.
//
// # The split
//
//   - views (reconciler/engine/views): the informers of the clusters' objects, one per
//     scope, and what the engine asks of them (Watchers: Ensure, Lookup, LookupCached,
//     Covers, Count, Retain, Stop, OverCapErr...); the compact views.Cached and its
//     decoding; the clients the informers list and watch with (views.Client, whose REST
//     client the writer decodes its answers with too); the cap on a peer's objects
//     (TooManyObjectsError). The engine calls it through clusterViews and keeps what
//     decides which scopes are watched (peerviews.go: the refresh, the label selectors,
//     the peers' clients, the reports of a scope over the cap) and the local watches of
//     objects in the way of copies (inTheWay, settledKey).
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
//
// None of the three imports the engine; views imports writer for the resource paths
// both read and write (writer.ResourcePath). TestLayering (cmd/kubectl-registry) holds
// them to it.
package engine
