package delivery

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// What a Release applied where, read back from its status slices: this replica's after a
// restart, and the other replicas' when sharded.

// loadInventory reads, once per Release, what its status slices say it applied where: after a
// restart, a member that leaves the decision still has its objects removed.
func (c *Controller) loadInventory(rel *v1alpha1.Release, st *releaseState) {
	mine, _ := c.slicesOf(rel)
	c.mu.Lock()
	defer c.mu.Unlock()
	st.loaded = true
	for _, s := range mine {
		for _, m := range s.Members {
			key := types.NamespacedName{Namespace: rel.Namespace, Name: m.Cluster}
			if st.members[key] != nil || len(m.Objects) == 0 {
				continue
			}
			ms := inventory(m)
			if m.Revision == rel.Status.LastCompleteRevision && (m.Phase == v1alpha1.PhaseReady || m.Phase == v1alpha1.PhaseDrifted) {
				// Ready at a revision that completed: its wave finished before this Controller
				// started, so a loss of health now is no failure of the rollout.
				ms.settled = m.Revision
			}
			st.members[key] = ms
		}
	}
}

// shareWith reads the other replicas' slices of a Release and shares its members with them (see
// share); it says how many members they report objects on.
func (c *Controller) shareWith(rel *v1alpha1.Release, st *releaseState, revision string, ownsRelease bool) int {
	_, others := c.slicesOf(rel)
	reps := c.reports(others, c.live())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.share(st, reps, revision, ownsRelease)
	n := 0
	for _, r := range reps {
		if len(r.status.Objects) > 0 {
			n++
		}
	}
	return n
}
