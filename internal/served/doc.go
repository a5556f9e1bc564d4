// Package served asks an API server whether it serves a resource, for the controllers that
// refuse to start without their CRDs (ClusterProfiles, Placements, PlacementDecisions) rather
// than log a failed watch every second or two.
package served
