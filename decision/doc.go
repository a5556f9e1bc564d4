// Package decision reads placement decisions in SIG Multicluster's format
// (sigs.k8s.io/cluster-inventory-api's PlacementDecision), whoever wrote them: this SDK's
// scheduler or another's. A decision is the set of PlacementDecision slices of one namespace that
// share a multicluster.x-k8s.io/decision-key label, ordered by their decision-index; each names
// ClusterProfiles, which clusterprofile.Publisher keeps under their Cluster's namespace and name.
// Read turns them into the registry's Clusters, and Decision.Members into a Fleet's members, for
// multicluster.Map and ForEach.
//
// A decision's writer may name only the cluster set it is written in: a reference to a
// ClusterProfile of another namespace is refused (Decision.Refused), so that whoever may write
// decisions in one cluster set cannot send a consumer's workloads, and its credentials, to
// another set's members.
package decision
