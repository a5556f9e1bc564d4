package delivery

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Health never deletes. A member leaves a decision either because someone chose so (it was
// excluded or unselected while Ready, its Cluster deleted or unjoined, the count lowered, the
// Release re-placed) or because of its health (its Cluster was not Ready when it left, past the
// placement's tolerations). A deliberate departure removes the Release's objects at once. A
// departure for health keeps them, as Karmada's graceful eviction does, until:
//
//   - every member of the decision is Ready at the revision (the replacement is in place),
//   - the departure grace (spec.departureGraceSeconds) has passed since the member left, and
//   - the member is Ready again: nothing is attempted on a member that cannot be reached.
//
// Until then its status is Departed and says which it waits for. A departure is recorded in the
// member's entry of the status slices (departedAt), so every replica, and the Controller after a
// restart, counts the grace from the same moment; a member that comes back into the decision
// keeps its objects, untouched, and is a member like any other again.

// DefaultDepartureGrace is how long a member that left for its health keeps a Release's objects
// once replaced, when the Release's spec.departureGraceSeconds is unset: Karmada's graceful
// eviction's default.
const DefaultDepartureGrace = 600 * time.Second

// memberHealth is how a leaving member's Cluster stands, as a pass sees it.
type memberHealth struct {
	gone   bool   // the registry no longer has the Cluster: a deliberate departure
	ready  bool   // its Ready condition is True
	reason string // its Ready condition's reason, when not True
}

// healthOf is how Cluster cl stands; nil is a Cluster the registry no longer has.
func healthOf(cl *v1alpha1.Cluster) memberHealth {
	if cl == nil {
		return memberHealth{gone: true}
	}
	cond := cl.Status.Condition(v1alpha1.ConditionReady)
	if cond == nil {
		// Never probed (no health controller runs on the set): nothing says the member left
		// for its health, so its departure is taken as the decision's writer meant it.
		return memberHealth{ready: true}
	}
	return memberHealth{ready: cond.Status == metav1.ConditionTrue, reason: cond.Reason}
}

// departure is a member that left the decision for its health and keeps the objects.
type departure struct {
	since time.Time // when it left
	until time.Time // when the grace ends, if that is all it waits for; zero otherwise
	waits string    // what it waits for, for its status
	// unready: it waits for its Cluster to be Ready again, which no event of the Release's
	// brings: the pass looks again after retryAfter.
	unready bool
}

// departures are the leaving members that left for their health and keep the Release's
// objects for now: a pure function of the snapshot.
func (s snapshot) departures() map[types.NamespacedName]departure {
	out := map[types.NamespacedName]departure{}
	for _, k := range s.leaving {
		h, v := s.health[k], s.own[k]
		if h.gone || v.removing {
			continue // deleted or unjoined: deliberate
		}
		since := v.departedAt
		if since.IsZero() {
			if h.ready {
				continue // left while Ready: someone chose so
			}
			since = s.now.Truncate(time.Second) // as status keeps it
		}
		d := departure{since: since}
		end := since.Add(s.gates.grace)
		switch {
		case !h.ready:
			d.unready, d.waits = true, fmt.Sprintf("its Cluster is not Ready (%s): nothing is attempted there", h.reason)
		case !s.replaced():
			d.waits = "the members of the decision are not all Ready at revision " + s.revision
		case s.now.Before(end):
			d.until, d.waits = end, "the departure grace ends at "+end.UTC().Format(time.RFC3339)
		default:
			continue // replaced, and the grace is over: removed
		}
		out[k] = d
	}
	return out
}

// departuresWait is how soon a pass should look again at the departed members though nothing
// calls: when a grace ends, or, for a member waiting to be Ready again (which no event of the
// Release brings), after retryAfter; zero for never.
func (s snapshot) departuresWait(departed map[types.NamespacedName]departure) time.Duration {
	var wait time.Duration
	for _, d := range departed {
		switch {
		case !d.until.IsZero():
			wait = pick(wait, d.until.Sub(s.now))
		case d.unready:
			wait = pick(wait, s.gates.retryAfter)
		}
	}
	return wait
}

// replaced: every member of the decision is Ready at the revision.
func (s snapshot) replaced() bool {
	for _, w := range s.waves {
		for _, k := range w {
			if !s.readyAt(s.views[k]) {
				return false
			}
		}
	}
	return true
}

// departedJudgement is the status of a member that left for its health.
func departedJudgement(d departure) judgement {
	return judgement{phase: v1alpha1.PhaseDeparted, reason: "LeftWhileNotReady",
		message: fmt.Sprintf("left the decision at %s while not Ready; keeps the Release's objects until its replacement is Ready and the departure grace has passed; waits: %s",
			d.since.UTC().Format(time.RFC3339), d.waits)}
}

// recordDepartures keeps, with c.mu held, when each member of p.departed left, and forgets it
// for the members back in the decision: the grace counts from the first pass that saw it go.
func recordDepartures(st *releaseState, p plan) {
	for k, ms := range st.members {
		if d, ok := p.departed[k]; ok {
			if ms.departedAt.IsZero() {
				ms.departedAt = d.since
			}
			continue
		}
		if !ms.removing {
			ms.departedAt = time.Time{}
		}
	}
}

// confirmDeliberate keeps, of the members a pass would remove, those whose departure the
// registry itself says was deliberate, and says how soon to look again (wait, or at most a
// second when one was put off). A member seen leaving while its Cluster was Ready is read again
// from the registry first: the decision and the Cluster come by different watches, and a
// placement that dropped a member for its health wrote the decision after it saw the member not
// Ready, which this controller's watch of the Cluster may not have brought yet. Removed on the
// older view, that member's objects would go as if someone had chosen so (TestHealthDepartureKeepsObjects
// saw it once in three CI runs). The read is made once per such member, when it leaves.
func (c *Controller) confirmDeliberate(ctx context.Context, s snapshot, remove []types.NamespacedName, wait time.Duration) ([]types.NamespacedName, time.Duration) {
	var confirmed []types.NamespacedName
	for _, k := range remove {
		if h, v := s.health[k], s.own[k]; h.gone || v.removing || !v.departedAt.IsZero() || !h.ready {
			confirmed = append(confirmed, k) // deleted, already being removed, or at its grace's end
			continue
		}
		cl, err := c.registry.ClusterregistryV1alpha1().Clusters(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), err == nil && healthOf(cl).ready:
			confirmed = append(confirmed, k)
		default: // not Ready after all, or not known: looked at again once the watch has caught up
			if wait <= 0 || wait > time.Second {
				wait = time.Second
			}
		}
	}
	return confirmed, wait
}
