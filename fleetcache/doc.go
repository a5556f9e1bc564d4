// Package fleetcache keeps watch caches of the members of a multicluster.Fleet: a tool asks once
// for a kind (typed, in client-go's types; dynamic, by resource; or metadata only) and gets it on
// every member, current and future, to list and to be told of changes, each object named with
// its member.
//
// A Cache follows the Fleet's membership: a kind's informer starts on a member when the member
// appears (and only once the kind is asked for, so a member whose caches nobody uses costs no
// goroutine), restarts when how the member is reached changes, and stops when the member leaves.
// Event handlers and indexers registered on a Kind apply to every member. Each member's cache of
// each kind has a status of its own (syncing, synced, or stale since when and why), so a dead or
// slow member never holds up the others: WaitForCacheSync waits for each member at most its own
// deadline and names those not synced.
//
// Requests of a member's caches carry the member's current credentials, resolved per request
// through the Fleet's access.Resolver: a rotated Secret or token file is picked up at the next
// request (after a 401 at once), without restarting the caches or losing their state. Every
// request is pinned to the member's server as the Resolver pins it.
//
// Memory is kept to what a tool reads: every cache drops managed fields, KindOptions.Transform
// drops more, and Metadata caches only object metadata.
package fleetcache
