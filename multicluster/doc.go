// Package multicluster turns Cluster registry entries into working clients for the member clusters
// they describe, and runs operations across many members at once: it follows each Cluster's
// auth-provider pointers with the caller's own permissions to build a rest.Config, caches and
// shares the resulting clients, and fans calls out with bounded concurrency, per-member timeouts
// and per-member results.
//
// It is being built; see the project's open issues.
package multicluster
