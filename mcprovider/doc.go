// Package mcprovider serves the registry's members to multicluster-runtime
// (sigs.k8s.io/multicluster-runtime): a Provider that follows a multicluster.Fleet and engages a
// controller-runtime cluster.Cluster per member, so controllers written with mcbuilder reconcile
// across every Cluster of a cluster set.
//
// Each engaged cluster is built on the member's resolution, under the Resolver's trust policy:
// every request goes through the member's pinned transport with its current credentials
// (multicluster.Member.Transport), so a rotated Secret is used at the next request without
// re-engaging, and nothing a member answers can send those credentials elsewhere. A member is
// disengaged when it leaves the Fleet and engaged anew, as a new cluster.Cluster, when how it is
// reached changes.
//
// Cluster names are the members' "namespace/name" in the registry (ClusterName, MemberKey):
// stable across restarts, and saying the cluster set.
//
// Only tools that import this package compile multicluster-runtime; the core packages do not
// depend on it.
package mcprovider
