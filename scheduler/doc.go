// Package scheduler keeps placement decisions written: for each placement (a policy of package
// placement, and where its decision goes), it decides from the members of a shared Fleet and
// writes the decision as SIG Multicluster's PlacementDecision slices (package decision), again
// whenever a Cluster that matters to it changes, and only when the decision changes.
//
// Decisions do not churn: a Cluster that joins and does not fit a placement costs it nothing (not
// even a decision), a Ready flap within a toleration changes nothing, and while the Fleet has not
// listed the registry, or has lost its watch, nothing is written, so that a failed or empty list
// never empties a decision.
package scheduler
