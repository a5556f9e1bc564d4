// Package multicluster turns Cluster registry entries into working clients for the member clusters
// they describe. A Resolver picks the member's API server from the Cluster's endpoints by the
// caller's client address, follows the Cluster's auth-provider pointers (Secrets, kubeconfigs,
// exec plugins, token files) with the caller's own permissions, and returns a rest.Config and an
// HTTP client for the member, cached until the inputs behind them change.
//
// The registry is written by others, so the Resolver trusts it only as far as the caller says:
// a Secret's credentials go only to the servers the Secret names (credential pinning), Secrets
// outside a Cluster's namespace, files outside the caller's chosen roots and exec commands not on
// the caller's list are refused, and no credential ever appears in an error or a log line.
// Pinning holds on every request, not only when resolving: the transport of the rest.Config the
// Resolver returns refuses any request for another server than the member's (a redirect that
// the member, or whatever answers at its address, sends elsewhere) with an OffServerError, in
// every client built from that config.
//
// A Fleet is a set of Members, live from the registry (NewFleet) or fixed (StaticFleet, LoadFleet,
// FleetOf); Status says how current a live one is, and Subscribe follows its membership. Map and
// ForEach act on many members at once, with bounded concurrency, per-member timeouts, canaries,
// and retries only of what provably did not reach a member; every member gets one Result. For
// unit tests of a callback, NewMember makes Members backed by fake clientsets.
package multicluster
