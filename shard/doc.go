// Package shard divides a fleet's members among the replicas of a controller, so that each member
// is owned by exactly one live replica and a replica works only on what it owns.
//
// Owner is the assignment: rendezvous (highest-random-weight) hashing of each member's key over
// the live replicas. Every replica computes it alone from the same two inputs (the member's key,
// the replicas that are live) and gets the same answer: no coordinator, no table to keep. When a
// replica joins or leaves, only the members it gains or loses move, about 1/n of them.
//
// View is the members a replica owns. NewView's follows a Fleet of every member and keeps its
// own; NewBucketView's asks the registry only for what it owns: the group divides 64 buckets
// (BucketLabel, on each Cluster, a hash of its name), and each replica watches its buckets'
// Clusters, and those in no bucket, so that it does not receive the others' status writes.
//
// It is multicluster-runtime's sharder (v0.24.1, pkg/manager/coordinator/sharded/sharder) with
// two fixes, measured in this package's tests beside it: the hash is finished with a 64-bit mixer,
// so that replica names that differ in their last character (StatefulSet's x-0, x-1, ...) split
// the members evenly, and weights take effect, as weighted rendezvous hashing's -ln(u)/w, where the
// original multiplies a 64-bit hash by the weight and so wraps around. See RELEASE.md.
package shard
