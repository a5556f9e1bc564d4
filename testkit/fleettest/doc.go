// Package fleettest holds what the SDK's integration tests share on top of localfleet: cluster
// sets of a test's own, copied from the local fleet's, and a hostile member that redirects.
package fleettest
