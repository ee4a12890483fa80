// Package members is the pure planner of the group's membership: what the group is.
// From the local Cluster CRs and reader Secrets and the Ready peers' views it decides
// which copies to create, update or delete, which departures are in force, which
// departure notices a member keeps, which peers get a reader identity here and when its
// token is due, and which credential a connection to a peer uses. It is shared by the
// controllers (reconciler/membership carries the plan out, reconciler/credentials the
// readers and notices, reconciler/clusters connects with Choose), by
// `kubectl registry sync-diff --membership` (which shows the plan) and by `kubectl
// registry leave` (the departures, Choose), none of which repeats a decision made here.
// It links apimachinery and our API only (TestLayering). It is split by concern:
// plan.go (inputs, Plan: the departures, the choice of a source per member and the
// trust in what it offers, the writes of each member), clusters.go (Cluster copies),
// secrets.go (reader Secrets: relays, pinning, token freshness), firstcontact.go
// (clusters learnt through relays), received.go (per-peer credentials), credential.go
// (Choose: which credential a connection uses), readers.go (the reader identities this
// cluster issues its peers: PlanReaders, TokenDue, LegacyTokenDue, BootstrapRules,
// LegacySubjects), departures.go (leave: the records, the
// majority, trusted time, forgetting), notices.go (the departure notices a member keeps:
// PlanNotices) and notice.go (reading one: NoticeView).
//
// The rules:
//   - The local cluster's own Cluster CR and Secret are never written from a peer.
//   - A Cluster CR describing cluster X is copied from X itself while X is a Ready peer.
//     When X is not reachable the local copy is left as it is, except that a Secret of X
//     relayed by another peer brings a newer token (by the token's own claims, capped at
//     MaxTokenLifetime) for the server and CA pinned for X; the controller writes it only
//     after the token authenticated there.
//   - A cluster this cluster has no Cluster CR for yet (first contact) is learnt only
//     when every peer that relays it relays it alike: the same name, cluster ID, API
//     server, CA and public key (firstcontact.go). Relays that disagree are never
//     settled by seniority: nothing is learnt and the conflict is reported
//     (RelayConflict) until they agree or this cluster's admin joins the cluster here.
//     When they agree it is learnt from the peer this cluster has known longest (then
//     the lowest cluster ID), never by a name a member chooses, and only once its
//     reader Secret verifies.
//   - A local object without the ownership mark is left alone, except a Cluster CR that
//     describes X and the Secret it references, which are adopted: they are the seed's
//     hand-made swap, and adopting them lets token renewals reach them.
//   - The cluster-disabled annotation and kubectl's last-applied annotation are local
//     decisions and are never copied or overwritten; a disabled cluster is quarantined:
//     nothing about it is taken from other members.
//   - Nothing is deleted, but for a cluster that left the group ("kubectl registry
//     leave", see Decide): its Cluster CR and the reader Secret copies are deleted and
//     it is not learnt again until a member's admin admits it back (join). A departure
//     takes effect when the departing cluster recorded it on its own Cluster, or when a
//     strict majority of the members record it on theirs, each read over this cluster's
//     own connection to that member (never a copy a member relays); one member alone
//     neither removes another nor keeps one in. Records dated ahead of this cluster's
//     clock by more than MaxSkew are refused. A cluster that sees itself departed
//     deletes its copies of every other member.
package members
