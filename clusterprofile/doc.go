// Package clusterprofile speaks SIG Multicluster's ClusterProfile API
// (sigs.k8s.io/cluster-inventory-api, multicluster.x-k8s.io/v1alpha1), the inventory that Argo
// CD's ApplicationSet, MultiKueue and Open Cluster Management publish and consume.
//
// Publishing: a Publisher keeps one ClusterProfile per Cluster of the registry, in the same
// namespace and of the same name, labelled and named (spec.clusterManager) as this registry's.
// It carries the Cluster's display name, version, cluster ID (KEP-2149's cluster.clusterset.k8s.io
// property), a ControlPlaneHealthy condition that mirrors Ready, and an access provider with the
// member's server and CA, as the Resolver's trust rules choose them, so that consumers reach the
// member with credentials of their own (an exec plugin). A profile never carries a credential. It
// is removed when its Cluster goes; profiles of other cluster managers are never touched. It
// runs on controller-runtime's controller (its queue, rate limiting, workers, metrics and logs),
// whose Reconciler it is, fed by the Clusters' and profiles' informers and the Fleet's events.
//
// Consuming: NewSource makes any manager's ClusterProfiles into Clusters that a Fleet follows
// (multicluster.NewFleetFrom), reached as cluster-inventory-api's access package reaches them
// (a provider file mapping access-provider names to exec plugins), but under the Resolver's trust
// rules: ExecPlugins runs only the file's own plugins, with the file's own args and env, and their
// credentials go only to the servers the caller allows and, request by request, to the profile's
// server alone. Fan-out, fleetcache and mcprovider then work over an inventory this registry did
// not write.
package clusterprofile
