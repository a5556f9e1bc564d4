// Package agent is what a member reached through a tunnel runs: konnectivity's stock agent, with
// the one identity, credential and destination that the tunnel server (package tunnel) holds it
// to. Manifests are the member's objects for it, as clusterregistry join --tunnel applies them or
// writes them out; Args are its flags, for the Deployment and for an agent run by hand.
//
// The agent authenticates to the tunnel server with a token of a ServiceAccount of the registry:
// the one its Cluster names (spec.kubernetesApiEndpoints.tunnel.agent), in the Cluster's
// namespace, bound to Audience. The token lives on the member, in a Secret of the namespace that
// join gives the member's account, so that a renewer (package rotation) replaces it with that
// account's own rights. The ServiceAccount's DestinationAnnotation says where the agent dials.
package agent
