// Package optikon is Optikon's v0 API on fleet-api (its swagger, api/v0/gen/swagger.md of
// optikon/api): the contract Optikon's UI calls, served under /v0 on the SDK.
//
// It serves one cluster set, for its caller as every native route does, on the same operations
// (Core: authorization, the Cluster writes, the caches), so that a check or a fix there holds
// here too. Its routes return values, which Encode writes once: a value as JSON, an error as
// Optikon's APIResponse, from the registry's typed errors, never from a body parsed back.
//
// A release (POST /v0/releases) is three objects of the registry made as the caller: the
// chart's Secret, a Placement of the clusters ?labels= selects, and a Release in Helm mode, each
// undone when a later one fails. Its list is read from fleet-api's caches of the members' Helm
// storage, each record summarized as it arrives (SummarizeHelmSecret).
package optikon
