// Package access turns a Cluster registry entry into a working, trusted client config for the
// member cluster it describes. A Resolver picks the member's API server from the Cluster's
// endpoints by the caller's client address, follows the Cluster's auth-provider pointers
// (Secrets, kubeconfigs, exec plugins, token files) with the caller's own permissions, and
// returns a Resolved: a rest.Config and an HTTP client for the member, cached until the inputs
// behind them change.
//
// The registry is written by others, so the Resolver trusts it only as far as the caller says:
// a Secret's credentials go only to the servers the Secret names (credential pinning), Secrets
// outside a Cluster's namespace, files outside the caller's chosen roots and exec commands (or
// arguments) not on the caller's list are refused, and no credential ever appears in an error or
// a log line. Pinning holds on every request, not only when resolving: the transport of the
// rest.Config the Resolver returns refuses any request for another server than the member's (a
// redirect that the member, or whatever answers at its address, sends elsewhere) with an
// OffServerError, in every client built from that config.
//
// Package multicluster builds members, fleets and fan-out on top of this one.
package access
