package delivery

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// Applying a revision to one member, pruning what it no longer has, and recording how it went.

// applyMember applies a bundle to one member, prunes what the revision no longer has, and
// records how it went.
func (c *Controller) applyMember(ctx context.Context, rel *v1alpha1.Release, b *Bundle, key types.NamespacedName, m *multicluster.Member) {
	relKey := types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}
	st := c.state(relKey)
	c.mu.Lock()
	ms := st.members[key]
	if ms == nil {
		ms = &memberState{objects: map[ref]*applied{}}
		st.members[key] = ms
	}
	ms.applying = true
	previous := ms.objects
	c.mu.Unlock()
	out := failed(&memberError{class: v1alpha1.FailureClusterNotFound, err: fmt.Errorf("no Cluster %s in the registry (or not among this controller's members)", key)})
	if m != nil {
		ctx, cancel := context.WithTimeout(ctx, c.opts.MemberTimeout)
		out = c.applierFor(b).apply(ctx, rel, b, key, m, previous)
		cancel()
	}
	c.record(relKey, ms, b, m, out)
}

// record records in a member's state how an apply to it went.
func (c *Controller) record(relKey types.NamespacedName, ms *memberState, b *Bundle, m *multicluster.Member, out outcome) {
	switch {
	case out.err != nil:
		c.recordFailed(relKey, ms, b, m, out)
	case out.helm:
		c.recordHelm(ms, out)
	default:
		c.recordApplied(relKey, ms, out)
	}
}

// recordFailed records a failed apply. It may have changed some objects before the error: what
// the watch said meanwhile is judged as after a whole apply (an object now at the failed
// revision is drift from the revision the member runs), not dropped.
func (c *Controller) recordFailed(relKey types.NamespacedName, ms *memberState, b *Bundle, m *multicluster.Member, out outcome) {
	revision := b.Revision
	if m != nil {
		revision = b.revisionFor(m.Cluster())
	}
	c.mu.Lock()
	during := ms.during
	ms.fail(revision, out.err, time.Now())
	changed := c.replay(relKey, ms, during)
	if out.left != nil {
		ms.objects = out.left
	}
	c.mu.Unlock()
	if changed {
		c.queue.Add(relKey)
	}
}

// recordHelm records Helm mode's apply of a revision: Helm waited until what it applied was
// ready, so what the watch said meanwhile is Helm's own doing.
func (c *Controller) recordHelm(ms *memberState, out outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ms.applying = false
	ms.revision, ms.applied = out.revision, time.Now()
	if out.unchanged && ms.reported.revision == out.revision && !ms.reported.applied.IsZero() {
		ms.applied = ms.reported.applied // applied then, as reported before this Controller started
	}
	ms.objects = out.objects
	ms.err, ms.failedRev, ms.attempts, ms.drifted, ms.drift, ms.readyAt, ms.during = nil, "", 0, false, "", time.Time{}, nil
	ms.settle(time.Now())
}

// recordApplied records a member's apply of out's revision, and replays over its answers what
// the watch said meanwhile.
func (c *Controller) recordApplied(relKey types.NamespacedName, ms *memberState, out outcome) {
	revision, objects := out.revision, out.objects
	c.mu.Lock()
	ms.applying = false
	appliedAt := time.Now()
	if ms.revision == "" && ms.reported.revision == revision && !ms.reported.applied.IsZero() {
		// The first apply since this Controller started, of the revision the member was
		// reported at: it applied that then. Its lastApplied, and the progress deadline counted
		// from it, stay as they were, so that a restart rewrites no status.
		appliedAt = ms.reported.applied
	}
	ms.revision, ms.applied, ms.objects, ms.shares = revision, appliedAt, objects, out.shares
	ms.err, ms.failedRev, ms.attempts, ms.drifted, ms.drift, ms.readyAt = nil, "", 0, false, "", time.Time{}
	changed := c.replay(relKey, ms, ms.during)
	ms.during = nil
	ms.settle(time.Now())
	c.mu.Unlock()
	if changed {
		c.queue.Add(relKey)
	}
}

// replay judges, with c.mu held, the watch's events that came while the member was being applied
// to, over what the apply left; it reports whether any changed what the plan depends on.
func (c *Controller) replay(relKey types.NamespacedName, ms *memberState, during []watched) bool {
	changed := false
	for _, ev := range during {
		if a := ms.objects[ev.r]; a != nil && c.observe(relKey, ms, a, ev.deleted, ev.obj) {
			changed = true
		}
	}
	return changed
}

// prune removes from a member what the previous revision applied and this one does not, in
// reverse apply order. An object it could not remove stays in objects, with its error, so that
// the next turn tries again.
func (c *Controller) prune(ctx context.Context, rel *v1alpha1.Release, key types.NamespacedName, m *multicluster.Member, mc *memberClients, previous, objects map[ref]*applied) *memberError {
	var stale []ref
	for r := range previous {
		if objects[r] == nil {
			stale = append(stale, r)
		}
	}
	for _, r := range removalOrder(stale) {
		if r.GVR == helmReleaseGVR { // the Release was in Helm mode: its Helm release goes
			if err := c.removeHelm(ctx, key, m, r); err != nil {
				objects[r] = &applied{ref: r, status: "Error", message: message(err)}
				return &memberError{class: classify(ctx, err), object: r.String(), err: fmt.Errorf("uninstalling the Helm release of Helm mode: %w", err)}
			}
			continue
		}
		c.writes.Add(1)
		if err := mc.deleteOne(ctx, r, rel.Name, rel.Namespace); err != nil {
			objects[r] = &applied{ref: r, status: "Error", message: message(err)}
			return &memberError{class: classify(ctx, err), object: r.String(), err: fmt.Errorf("pruning: %w", err)}
		}
	}
	return nil
}
