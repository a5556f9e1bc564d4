// Package join makes a member reachable from a registry, and undoes it: what `clusterregistry
// join` and `unjoin` do, for tools that register clusters themselves (such as an API whose POST
// registers one).
//
// Join, with a member's administrator config, makes on the member a namespace and a service
// account of their own for one Cluster of one cluster set of one registry, binds the account to a
// ClusterRole, lets it renew its own token and nothing else (package rotation), asks for a token,
// stores it in the registry in a Secret pinned to the member's server, and applies the Cluster.
// With Options.Exec it makes nothing on the member: the Cluster names the member config's exec
// plugin, which each reader runs with their own identity. What the registry or the member would
// refuse is found before anything is made; a dry run checks as much and changes nothing. Joining
// again updates what it made, with a fresh token, and revokes the tokens it replaces.
//
// Unjoin removes what Join made for a Cluster: on the member (when given a config for it) the
// account, its binding and its namespace, which revokes every token of it; then the Cluster and
// its token Secret in the registry. What other cluster sets or registries joined of the same
// member is left alone: every object Join makes on a member records which registry and Cluster
// it belongs to (RegistryAnnotation, ClusterAnnotation).
package join
