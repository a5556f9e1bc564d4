package delivery

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// churn is the decision changing under a simulated rollout: members leave it for their health
// (their Cluster not Ready) or deliberately (excluded while Ready), come back, and recover while
// out. It plays the Controller's own records too: a stop, once planned, is recorded (stop.go),
// and a departure's time is kept (recordDepartures).
type churn struct {
	on       bool
	members  []types.NamespacedName
	groups   map[types.NamespacedName]int
	strategy v1alpha1.ReleaseRolloutStrategy
	// out are the members the decision does not name; unhealthy those whose Cluster is not
	// Ready; leftAt when a member left for its health.
	out, unhealthy map[types.NamespacedName]bool
	leftAt         map[types.NamespacedName]time.Time
	// moved: the decision changed during the revision, so waves may have been recomputed.
	moved bool
}

// withChurn has members of r leave the decision and come back, with a departure grace of up to
// 5 s.
func (r *rollout) withChurn() *rollout {
	r.churn.on = true
	r.churn.out, r.churn.unhealthy, r.churn.leftAt = map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}, map[types.NamespacedName]time.Time{}
	r.snap.gates.grace = time.Duration(r.rng.IntN(6)) * time.Second
	return r
}

// snapshot is what the Controller would snapshot now: the decision's members in waves, the
// leaving members with their Clusters' health, every member with objects as its own.
func (r *rollout) snapshot() snapshot {
	c := r.churn
	if c == nil || !c.on {
		return r.snap
	}
	s := r.snap
	var decided []types.NamespacedName
	for _, k := range c.members {
		if !c.out[k] {
			decided = append(decided, k)
		}
	}
	s.waves = Waves(decided, c.groups, &v1alpha1.ReleaseRollout{Strategy: c.strategy})
	clear(r.order)
	for i, w := range s.waves {
		for _, k := range w {
			r.order[k] = i
		}
	}
	s.views, s.own, s.mine = map[types.NamespacedName]view{}, map[types.NamespacedName]view{}, map[types.NamespacedName]bool{}
	s.health, s.leaving, s.empty = map[types.NamespacedName]memberHealth{}, nil, len(decided) == 0
	for _, k := range c.members {
		v, known := r.snap.views[k]
		if known && v.known {
			s.own[k] = v
		}
		if !c.out[k] {
			s.mine[k] = true
			if known {
				s.views[k] = v
			}
		} else if known && v.known {
			s.leaving = append(s.leaving, k)
			s.health[k] = memberHealth{ready: !c.unhealthy[k], reason: map[bool]string{true: v1alpha1.ReasonUnreachable}[c.unhealthy[k]]}
		}
	}
	return s
}

// acted holds plan p of snapshot s to the membership invariants, then plays what the
// Controller records and what removal does.
func (c *churn) acted(r *rollout, s snapshot, p plan, i int) {
	// No member that did not run a stopped revision is ever given it, whatever left since.
	if p.stopped && s.stop == nil {
		r.snap.stop = &Stop{Message: "recorded"}
		r.stoppedAt = s.revision
	}
	if r.stoppedAt == s.revision {
		for _, k := range p.apply {
			require.True(r.t, s.tried(s.views[k]), "step %d: the rollout of %s stopped, and %s, which never ran it, is given it", i, s.revision, k.Name)
		}
	}
	// A wave begins only while the failures, counting the members lost mid-rollout (left for
	// their health, tried at the revision and not Ready at it), are within maxFailures.
	if c.on {
		lost := c.lostMidRollout(s)
		for _, k := range p.apply {
			if !s.tried(s.views[k]) {
				require.LessOrEqual(r.t, lost, s.gates.maxFailures, "step %d: %s begins though %d members were lost mid-rollout, more than maxFailures (%d)",
					i, k.Name, lost, s.gates.maxFailures)
			}
		}
	}
	if !c.on {
		return
	}
	for _, k := range p.remove {
		require.Contains(r.t, s.leaving, k, "step %d: %s removed while the decision names it", i, k.Name)
		if left := c.leftAt[k]; !left.IsZero() {
			// A member that left for its health is never removed before its grace, nor while it
			// cannot be reached, nor before the decision's members are all Ready.
			require.False(r.t, c.unhealthy[k], "step %d: %s removed while not Ready", i, k.Name)
			require.False(r.t, s.now.Before(left.Truncate(time.Second).Add(s.gates.grace)), "step %d: %s removed %s after it left, before its grace of %s",
				i, k.Name, s.now.Sub(left), s.gates.grace)
			require.True(r.t, s.replaced(), "step %d: %s removed before its replacement was Ready", i, k.Name)
		}
		delete(r.snap.views, k)
		delete(c.leftAt, k)
	}
	for _, k := range s.leaving {
		_, departed := p.departed[k]
		removed := slices.Contains(p.remove, k)
		if c.leftAt[k].IsZero() && !p.held {
			require.True(r.t, removed, "step %d: %s left deliberately, and keeps its objects", i, k.Name)
		}
		if !c.leftAt[k].IsZero() && !p.held {
			require.True(r.t, departed || removed, "step %d: %s left for its health, and is neither kept nor removed", i, k.Name)
		}
		if v := r.snap.views[k]; departed && v.departedAt.IsZero() {
			v.departedAt = p.departed[k].since
			r.snap.views[k] = v
		}
	}
	for k := range s.mine { // back in the decision: a member like any other
		if v, ok := r.snap.views[k]; ok {
			v.departedAt = time.Time{}
			r.snap.views[k] = v
		}
	}
}

// lostMidRollout counts the members that left for their health, as the test made them, that
// were tried at the revision and are not Ready at it, and the members failed in the decision.
func (c *churn) lostMidRollout(s snapshot) int {
	n := 0
	for _, k := range c.members {
		v, known := s.own[k]
		switch {
		case c.out[k] && !c.leftAt[k].IsZero() && known && s.tried(v) && !s.readyAt(v) && !s.settledAt(v):
			n++
		case !c.out[k] && s.failedAt(s.views[k]):
			n++
		}
	}
	return n
}

// happen is one change of membership, of member k.
func (c *churn) happen(r *rollout, k types.NamespacedName, event int) {
	switch {
	case event == 8 && !c.out[k]: // its Cluster stops being Ready past the tolerations
		c.out[k], c.unhealthy[k], c.moved = true, true, true
		if r.snap.views[k].known {
			c.leftAt[k] = r.snap.now
		}
	case event == 9 && !c.out[k]: // excluded, or its labels no longer selected, while Ready
		c.out[k], c.unhealthy[k], c.moved = true, false, true
		delete(c.leftAt, k)
	case event == 10 && c.out[k]: // back in the decision
		c.out[k], c.unhealthy[k], c.moved = false, false, true
		delete(c.leftAt, k)
	case event == 11: // its Cluster is Ready again
		c.unhealthy[k] = false
	}
}

// Over generated sequences in which members also leave the decision, for their health and
// deliberately, and come back, every plan keeps the promises of TestPlanInvariants and these:
// a stopped revision reaches no member that did not run it; a member that left for its health
// is never removed before its grace, while unreachable or before its replacement is Ready; a
// member that left deliberately is removed at once; removals are only of members that left.
func TestPlanInvariantsUnderChurn(t *testing.T) {
	for seed := range uint64(400) {
		r := newRollout(t, seed).withChurn()
		for i := range 80 {
			r.step(i)
		}
	}
}
