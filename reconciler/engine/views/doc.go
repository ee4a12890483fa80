// Package views is the engine's views of the clusters' objects, the local cluster's and
// the peers': one informer per scope (a cluster, a kind, a namespace or all of them, or
// one local object by name), shared by every rule that reads it.
//
//   - Watchers (watchers.go) starts and stops the informers (Ensure, Stop, Retain), finds
//     an object in the scopes that cover its key and tells a proven absence from a view
//     that has not synced (Lookup, LookupCached, Covers), counts the objects that match a
//     rule for its status (Count) and says why a scope has not synced (SyncErr).
//   - Cached (cached.go) is how an informer keeps an object: the JSON the API server sent,
//     less managedFields, decoded when it is read (Object, or MetadataOnly when matching
//     reads the metadata alone).
//   - Client (source.go) is how the informers reach a cluster: a REST client that reads the
//     API server's JSON straight into Cached objects (and, for package writer, the answers
//     to writes), or a dynamic client, whose objects are compacted (the fakes of unit
//     tests).
//   - The cap on objects (objectcap.go): a peer's scope that offers more objects than the
//     cap, or answers over a byte limit, is not watched (TooManyObjectsError) and is tried
//     again, backing off on Options.Clock.
//
// The package knows nothing of rules, plans or writes. The engine (reconciler/engine)
// decides which scopes are watched, under which label selector and cap (its refresh,
// peerviews.go), receives their changes through a Handler, and reads the views through
// its clusterViews interface, which Watchers implements: a call into this package from
// wherever the engine plans or writes, never a return into an engine file.
package views
