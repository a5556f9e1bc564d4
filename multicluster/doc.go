// Package multicluster acts on many member clusters at once. A Member is one registry entry with
// lazily built, shared clients (a clientset, a dynamic and a controller-runtime client) whose
// credentials come from an access.Resolver and are rebuilt only when how the member is reached
// changes.
//
// A Fleet is a live view of the registry's Clusters as Members (NewFleet, Start, Stop); Status
// says how current it is, and Subscribe follows its membership, for tools that keep per-member
// state. MembersOf and LoadMembers give the Members of a fixed set of Clusters, such as a file's.
//
// Map and ForEach act on many members at once, with bounded concurrency, per-member timeouts,
// canaries, and retries only of what provably did not reach a member; every member gets one
// Result. For unit tests of a callback, NewMember makes Members backed by fake clientsets.
package multicluster
