package v1alpha1

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Release's facts that every reader works out the same way (the releases controller, the
// command's get and describe, fleet-api): each has one home, here.

// TargetNamespaceOrDefault is the namespace the Release's namespaced objects without one land
// in, and a Helm-mode release is installed in: spec.targetNamespace, else "default".
func (r *Release) TargetNamespaceOrDefault() string {
	return cmp.Or(r.Spec.TargetNamespace, metav1.NamespaceDefault)
}

// DecisionKey is the decision key of the PlacementDecisions the Release follows: its
// placement's name, else spec.placement.decisionKey.
func (r *Release) DecisionKey() string {
	return cmp.Or(r.Spec.Placement.Name, r.Spec.Placement.DecisionKey)
}

// MembersOf are the Release's member statuses in its ReleaseStatusSlices (those it controls), by
// cluster name, each member once. A member two slices name (a handoff between the replicas of a
// sharded controller leaves it in both for a while) is taken from the slice that last applied
// there, else the one that names objects, else the first by name: what the controller's
// newest word about it is likely to be.
func MembersOf(rel *Release, statusSlices []ReleaseStatusSlice) []ReleaseMemberStatus {
	ordered := slices.Clone(statusSlices)
	slices.SortFunc(ordered, func(a, b ReleaseStatusSlice) int { return cmp.Compare(a.Name, b.Name) })
	byCluster := map[string]ReleaseMemberStatus{}
	for i := range ordered {
		if !metav1.IsControlledBy(&ordered[i], rel) {
			continue
		}
		for _, m := range ordered[i].Members {
			if have, ok := byCluster[m.Cluster]; !ok || newer(m, have) {
				byCluster[m.Cluster] = m
			}
		}
	}
	out := make([]ReleaseMemberStatus, 0, len(byCluster))
	for _, m := range byCluster {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b ReleaseMemberStatus) int { return cmp.Compare(a.Cluster, b.Cluster) })
	return out
}

// newer: report a says more recent news of its member than b.
func newer(a, b ReleaseMemberStatus) bool {
	switch {
	case a.LastApplied != nil && (b.LastApplied == nil || a.LastApplied.After(b.LastApplied.Time)):
		return true
	case b.LastApplied != nil && (a.LastApplied == nil || b.LastApplied.After(a.LastApplied.Time)):
		return false
	}
	return len(a.Objects) > 0 && len(b.Objects) == 0
}
