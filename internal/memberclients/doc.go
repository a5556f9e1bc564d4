// Package memberclients builds a member's clients, each kind on first use and then shared: a
// clientset that speaks protobuf, a dynamic client, a metadata client and a controller-runtime
// client, all on one config and one HTTP client. multicluster.Member holds one set per
// resolution of its Cluster; fleetcache one per member whose caches run, on a transport that
// resolves the credentials on each request.
package memberclients
