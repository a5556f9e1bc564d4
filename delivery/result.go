package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
)

// result is what one pass over a Release comes to: the status it reports and what that status
// is judged from, when to look again, and what the Release's owner records beside the status.
// Every way out of a pass makes one; finish reports it, at the pass's one exit.
type result struct {
	bundle *Bundle
	dec    *decision.Decision
	// status is what the Release's status says; nil writes none (a finalizer added or
	// removed, a Release another replica owns that is not yet taken).
	status *progress
	// requeue is when to look again; recheck, when set, is the latest that may be (a Ready
	// Release's recheck, a source's refresh).
	requeue, recheck time.Duration
	// owner says the replica owns the Release: a planned pass tells its events and keeps its
	// history.
	owner bool
	// rollback starts a rollback from the planned pass's failures; recordStop records the stop
	// of a stopped rollout. Each is the owner's alone.
	rollback, recordStop bool
	// err is what went wrong before the report (a finalizer's update).
	err error
}

// stalled is the result of a pass that stopped before its plan: a Stalled condition of reason
// and message, looked at again after (0: when something calls).
func stalled(b *Bundle, dec *decision.Decision, after time.Duration, reason, message string) result {
	return result{bundle: b, dec: dec, requeue: after, status: &progress{stalledReason: reason, stalledMessage: message}}
}

// finish reports a pass's result: the owner's events and history, the status, the rollback or
// stop it records, and the dependents it tells; it says when to look again.
func (c *Controller) finish(ctx context.Context, rel *v1alpha1.Release, st *releaseState, r result) (time.Duration, error) {
	errs := []error{r.err}
	planned := r.status != nil && r.status.plan != nil
	if planned && r.owner {
		c.tell(rel, st, *r.status.snap, *r.status.plan)
		if err := c.keepHistory(ctx, rel, r.bundle, *r.status.plan); err != nil {
			errs = append(errs, fmt.Errorf("recording revision %s in the history: %w", r.bundle.Revision, err))
		}
	}
	if r.status != nil {
		errs = append(errs, c.writeStatus(ctx, rel, r.bundle, r.dec, *r.status))
	}
	switch {
	case r.rollback:
		errs = append(errs, c.startRollback(ctx, rel, r.bundle, *r.status.plan))
	case r.recordStop:
		errs = append(errs, c.recordStop(ctx, rel, r.bundle.Revision, *r.status.plan))
	}
	if planned {
		c.tellDependents(rel, st, r.bundle.Revision, *r.status.plan)
	}
	err := errors.Join(errs...)
	requeue := r.requeue
	if r.rollback {
		requeue = time.Millisecond // the next pass rolls back
		if err != nil {
			requeue = time.Second
		}
	}
	return pick(requeue, r.recheck), err
}
