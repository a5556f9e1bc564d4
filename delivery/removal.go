package delivery

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// Removing a Release's objects from a member: one that left the decision (departure.go says
// when one that left for its health may go), or every member, when the Release is deleted.

// removeMember removes a Release's objects from a member it no longer reaches (DeletionPolicy
// Delete), and records how it went; a member no longer in the registry is forgotten.
func (c *Controller) removeMember(ctx context.Context, rel *v1alpha1.Release, st *releaseState, key types.NamespacedName, m *multicluster.Member) {
	c.mu.Lock()
	ms := st.members[key]
	if ms == nil {
		c.mu.Unlock()
		return
	}
	ms.removing = true
	refs := make([]ref, 0, len(ms.objects))
	for r := range ms.objects {
		refs = append(refs, r)
	}
	c.mu.Unlock()
	var err *memberError
	if m != nil && rel.Spec.DeletionPolicy != v1alpha1.DeletionOrphan {
		err = c.removeObjects(ctx, rel, key, m, refs)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		ms.err, ms.failedAt = err, time.Now()
		ms.settle(ms.failedAt)
		return
	}
	delete(st.members, key)
}

// removeObjects removes refs from a member, in reverse apply order, within MemberTimeout.
func (c *Controller) removeObjects(ctx context.Context, rel *v1alpha1.Release, key types.NamespacedName, m *multicluster.Member, refs []ref) *memberError {
	ctx, cancel := context.WithTimeout(ctx, c.opts.MemberTimeout)
	defer cancel()
	mc, err := c.clients.get(ctx, m)
	if err == nil {
		for _, r := range removalOrder(refs) {
			if r.GVR == helmReleaseGVR {
				if err = c.removeHelm(ctx, key, m, r); err != nil {
					break
				}
				continue
			}
			c.writes.Add(1)
			if err = mc.deleteOne(ctx, r, rel.Name, rel.Namespace); err != nil {
				break
			}
		}
	}
	if err != nil {
		return &memberError{class: classify(ctx, err), err: fmt.Errorf("removing: %w", err)}
	}
	return nil
}

// finalize removes a deleted Release's objects from every member, then lets it go.
func (c *Controller) finalize(ctx context.Context, rel *v1alpha1.Release, st *releaseState, ownsRelease bool) result {
	if !slices.Contains(rel.Finalizers, Finalizer) {
		return result{}
	}
	byName := c.memberIndex()
	reported := c.shareWith(rel, st, "", ownsRelease)
	c.mu.Lock()
	var keys []types.NamespacedName
	for k := range st.members {
		if c.owns(k) { // the others wait for their owner to take them
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	// Dependents leave a member first: where one still has its objects, this Release waits.
	_, held := c.dependencyGates(rel, nil, keys)
	keys = slices.DeleteFunc(keys, func(k types.NamespacedName) bool { return held[k] != "" })
	defer c.tellDependencies(rel)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.MemberConcurrency)
	for _, k := range keys {
		g.Go(func() error { c.removeMember(gctx, rel, st, k, byName[k]); return nil })
	}
	_ = g.Wait()
	c.mu.Lock()
	left := len(st.members)
	c.mu.Unlock()
	c.rewatch()
	if ownsRelease {
		// Sharded, the other replicas' members too: their slices name the members they have
		// not yet removed.
		left += reported
	}
	if left > 0 || !ownsRelease {
		snap := c.snapshot(st, nil, nil, nil, gates{}, nil)
		msg := fmt.Sprintf("%d members still have the Release's objects", left)
		for _, why := range held {
			msg += fmt.Sprintf(" (%d wait: %s)", len(held), why)
			break
		}
		r := result{status: &progress{snap: &snap, stalledReason: "Removing", stalledMessage: msg}}
		if left > 0 {
			r.requeue = c.opts.RetryAfter
		} // else this replica's part is done; the Release's owner lets it go
		return r
	}
	rel = rel.DeepCopy()
	rel.Finalizers = slices.DeleteFunc(rel.Finalizers, func(f string) bool { return f == Finalizer })
	c.writes.Add(1)
	_, err := c.registry.ClusterregistryV1alpha1().Releases(rel.Namespace).Update(ctx, rel, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return result{err: err}
}
