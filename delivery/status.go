package delivery

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/internal/safetext"
)

// SliceSize is how many members a ReleaseStatusSlice holds at most.
const SliceSize = 100

// progress is what a turn learnt of the rollout, for status.
type progress struct {
	wave, waves    int
	stopped        bool
	failures       int
	deadline       time.Duration
	stalledReason  string
	stalledMessage string
	// held: the decision is empty and nothing is removed; the members keep their phases.
	held bool
}

// badness orders phases from worst to best, for Release.status.worst.
var badness = []v1alpha1.ReleaseMemberPhase{
	v1alpha1.PhaseFailed, v1alpha1.PhaseUnreachable, v1alpha1.PhaseDrifted, v1alpha1.PhaseRemoving,
	v1alpha1.PhaseProgressing, v1alpha1.PhaseApplying, v1alpha1.PhasePending, v1alpha1.PhaseReady,
}

// memberStatus is how the Release stands on a member, with c.mu held.
func (c *Controller) memberStatus(rel *v1alpha1.Release, key types.NamespacedName, ms *memberState, revision string, p progress, named bool) v1alpha1.ReleaseMemberStatus {
	out := v1alpha1.ReleaseMemberStatus{Cluster: key.Name}
	if ms == nil {
		out.Phase, out.Reason = v1alpha1.PhasePending, "WaitingForWave"
		if p.stopped {
			out.Reason, out.Message = "RolloutStopped", "the rollout stopped before this member's wave"
		}
		return out
	}
	out.Revision = ms.revision
	if !ms.applied.IsZero() {
		t := metav1.NewTime(ms.applied.Truncate(time.Second))
		out.LastApplied = &t
	}
	refs := make([]ref, 0, len(ms.objects))
	for r := range ms.objects {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(a.String(), b.String()) })
	var notCurrent *applied
	for _, r := range refs {
		a := ms.objects[r]
		st, msg := a.status, a.message
		if a.gone {
			st, msg = "NotFound", "deleted on the member"
		}
		out.Objects = append(out.Objects, v1alpha1.ReleaseObjectStatus{Group: r.GVR.Group, Version: r.GVR.Version, Resource: r.GVR.Resource,
			Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Status: st, Message: msg})
		if notCurrent == nil && (a.gone || a.status != "Current") {
			notCurrent = a
		}
	}
	switch {
	case ms.removing || !named:
		out.Phase, out.Reason = v1alpha1.PhaseRemoving, "LeftDecision"
		if rel.DeletionTimestamp != nil {
			out.Reason = "ReleaseDeleted"
		}
		if ms.err != nil {
			out.Message = safetext.OneLine(ms.err.Error(), 1024)
		}
	case ms.applying:
		out.Phase = v1alpha1.PhaseApplying
	case ms.err != nil && v1alpha1.Unreachable(ms.err.class):
		out.Phase, out.Reason, out.Message = v1alpha1.PhaseUnreachable, ms.err.class, safetext.OneLine(ms.err.Error(), 1024)
	case ms.err != nil && ms.failedRev == revision:
		out.Phase, out.Reason, out.Message = v1alpha1.PhaseFailed, ms.err.class, safetext.OneLine(ms.err.Error(), 1024)
	case ms.revision != revision:
		out.Phase, out.Reason = v1alpha1.PhasePending, "WaitingForWave"
		if p.stopped {
			out.Reason, out.Message = "RolloutStopped", "the rollout stopped before this member's wave"
		}
	case ms.drifted:
		out.Phase, out.Reason, out.Message = v1alpha1.PhaseDrifted, "Drifted", "an object was changed on the member by someone else"
		if driftPolicy(rel) == v1alpha1.DriftCorrect {
			out.Message += "; correcting"
		}
	case c.ready(ms):
		out.Phase = v1alpha1.PhaseReady
	case notCurrent != nil && notCurrent.status == "Failed":
		out.Phase, out.Reason, out.Message = v1alpha1.PhaseFailed, "ObjectFailed", safetext.OneLine(notCurrent.ref.String()+": "+notCurrent.message, 1024)
	case p.deadline > 0 && time.Since(ms.applied) > p.deadline:
		out.Phase, out.Reason = v1alpha1.PhaseFailed, v1alpha1.FailureTimeout
		out.Message = fmt.Sprintf("not healthy within %s of its apply", p.deadline)
		if notCurrent != nil {
			out.Message = safetext.OneLine(out.Message+": "+notCurrent.ref.String()+": "+notCurrent.message, 1024)
		}
	default:
		out.Phase, out.Reason = v1alpha1.PhaseProgressing, "WaitingForHealth"
		if notCurrent != nil {
			out.Message = safetext.OneLine(notCurrent.ref.String()+" is "+notCurrent.status+": "+notCurrent.message, 1024)
		}
	}
	return out
}

// writeStatus writes the Release's status and slices, each only when it changed.
func (c *Controller) writeStatus(ctx context.Context, rel *v1alpha1.Release, st *releaseState, b *Bundle, dec *decision.Decision, p progress) error {
	status := v1alpha1.ReleaseStatus{ObservedGeneration: rel.Generation, Conditions: slices.Clone(rel.Status.Conditions)}
	var members []v1alpha1.ReleaseMemberStatus
	revision := rel.Status.Revision
	status.Chart = rel.Status.Chart
	if b != nil {
		revision = b.Revision
		status.Chart = b.chartStatus()
	}
	status.Revision = revision
	relKey := types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}
	ownsRelease := c.owns(relKey)
	_, others := c.slicesOf(rel)
	reps := c.reports(others, c.live())
	// mine are the members this replica reports in its slices: those it owns, and those it
	// holds until their new owner reports them. members are the Release's: mine, and the other
	// replicas' reports of the rest.
	var mine []v1alpha1.ReleaseMemberStatus
	c.mu.Lock()
	named := map[types.NamespacedName]bool{}
	if dec != nil {
		for _, k := range dec.Clusters {
			named[k] = true
			ms := st.members[k]
			var m v1alpha1.ReleaseMemberStatus
			if c.owns(k) || ms != nil {
				m = c.memberStatus(rel, k, ms, revision, p, true)
				mine = append(mine, m)
			}
			if r, ok := reps[k]; ok && (!c.owns(k) || ms == nil) {
				m = r.status
			} else if m.Cluster == "" {
				m = c.memberStatus(rel, k, nil, revision, p, true) // nobody reports it yet
			}
			members = append(members, m)
		}
	}
	for k, ms := range st.members {
		if !named[k] && (dec != nil || rel.DeletionTimestamp != nil) {
			m := c.memberStatus(rel, k, ms, revision, p, p.held)
			mine = append(mine, m)
			members = append(members, m)
		}
	}
	c.mu.Unlock()
	for k, r := range reps {
		if !named[k] && (dec != nil || rel.DeletionTimestamp != nil) && len(r.status.Objects) > 0 && !slices.ContainsFunc(mine, func(m v1alpha1.ReleaseMemberStatus) bool { return m.Cluster == k.Name }) {
			members = append(members, r.status)
		}
	}
	if dec == nil && rel.DeletionTimestamp == nil {
		// Without a decision, the members' status stands as last written.
		members, mine = nil, nil
	}

	counts := map[v1alpha1.ReleaseMemberPhase]int32{}
	for _, m := range members {
		counts[m.Phase]++
	}
	if dec != nil {
		status.Members = int32(len(dec.Clusters))
	}
	status.Ready = counts[v1alpha1.PhaseReady]
	for _, ph := range badness {
		if counts[ph] > 0 {
			status.Phases = append(status.Phases, v1alpha1.ReleasePhaseCount{Phase: ph, Count: counts[ph]})
		}
	}
	if p.waves > 0 {
		status.Waves = int32(p.waves)
		status.Wave = int32(min(p.wave+1, p.waves))
	}
	worst := slices.Clone(members)
	worst = slices.DeleteFunc(worst, func(m v1alpha1.ReleaseMemberStatus) bool { return m.Phase == v1alpha1.PhaseReady })
	slices.SortStableFunc(worst, func(a, b v1alpha1.ReleaseMemberStatus) int {
		return cmp.Or(cmp.Compare(slices.Index(badness, a.Phase), slices.Index(badness, b.Phase)), cmp.Compare(a.Cluster, b.Cluster))
	})
	for _, m := range worst[:min(len(worst), 10)] {
		m.Objects = nil
		status.Worst = append(status.Worst, m)
	}

	gen := rel.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: safetext.OneLine(msg, 1024), ObservedGeneration: gen})
	}
	switch {
	case p.stalledReason != "":
		set(v1alpha1.ReleaseStalled, metav1.ConditionTrue, p.stalledReason, p.stalledMessage)
	case p.stopped:
		set(v1alpha1.ReleaseStalled, metav1.ConditionTrue, "TooManyFailures",
			fmt.Sprintf("%d members failed, more than maxFailures allows: the rollout stopped before wave %d of %d", p.failures, p.wave+1, p.waves))
	default:
		set(v1alpha1.ReleaseStalled, metav1.ConditionFalse, "NotStalled", "")
	}
	busy := counts[v1alpha1.PhasePending] + counts[v1alpha1.PhaseApplying] + counts[v1alpha1.PhaseProgressing] + counts[v1alpha1.PhaseRemoving]
	switch {
	case p.stalledReason != "" || p.stopped:
		set(v1alpha1.ReleaseProgressing, metav1.ConditionFalse, "Stopped", "see Stalled")
	case busy > 0:
		set(v1alpha1.ReleaseProgressing, metav1.ConditionTrue, "RollingOut", fmt.Sprintf("wave %d of %d; %d of %d members ready", status.Wave, status.Waves, status.Ready, status.Members))
	default:
		set(v1alpha1.ReleaseProgressing, metav1.ConditionFalse, "Complete", fmt.Sprintf("%d of %d members ready", status.Ready, status.Members))
	}
	switch {
	case dec == nil:
		set(v1alpha1.ReleaseAvailable, metav1.ConditionUnknown, "NoDecision", "the decision cannot be read")
	case status.Members == 0:
		set(v1alpha1.ReleaseAvailable, metav1.ConditionFalse, "NoMembers", "the decision names no member")
	case status.Ready == status.Members:
		set(v1alpha1.ReleaseAvailable, metav1.ConditionTrue, "AllReady", fmt.Sprintf("every member (%d) runs revision %s, healthy", status.Members, revision))
	default:
		set(v1alpha1.ReleaseAvailable, metav1.ConditionFalse, "NotAllReady", fmt.Sprintf("%d of %d members ready", status.Ready, status.Members))
	}
	if dec != nil && len(dec.Refused) > 0 {
		// The decision's writer named another set's members: never followed, and said, not dropped.
		available := meta.FindStatusCondition(status.Conditions, v1alpha1.ReleaseAvailable)
		set(v1alpha1.ReleaseAvailable, available.Status, available.Reason, available.Message+"; "+refusedReferences(dec.Refused))
	}
	if bad := counts[v1alpha1.PhaseFailed] + counts[v1alpha1.PhaseUnreachable] + counts[v1alpha1.PhaseDrifted]; bad > 0 {
		set(v1alpha1.ReleaseDegraded, metav1.ConditionTrue, string(worst[0].Phase), fmt.Sprintf("%d failed, %d unreachable, %d drifted", counts[v1alpha1.PhaseFailed], counts[v1alpha1.PhaseUnreachable], counts[v1alpha1.PhaseDrifted]))
	} else {
		set(v1alpha1.ReleaseDegraded, metav1.ConditionFalse, "NotDegraded", "")
	}

	if dec != nil || rel.DeletionTimestamp != nil {
		if err := c.writeSlices(ctx, rel, mine, others, ownsRelease); err != nil {
			return err
		}
	}
	if !ownsRelease {
		return nil // the Release's owner writes its status, from every replica's slices
	}
	if dec == nil && rel.DeletionTimestamp == nil {
		// Keep the counts last written: a missing decision says nothing about the members.
		status.Members, status.Ready, status.Phases, status.Worst, status.Wave, status.Waves =
			rel.Status.Members, rel.Status.Ready, rel.Status.Phases, rel.Status.Worst, rel.Status.Wave, rel.Status.Waves
	}
	if apierrors.Semantic.DeepEqual(status, rel.Status) {
		return nil
	}
	out := rel.DeepCopy()
	out.Status = status
	c.writes.Add(1)
	_, err := c.registry.ClusterregistryV1alpha1().Releases(rel.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	if kerrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	// A conflict (the Release read was older than the registry's) goes back to the queue with the
	// error, to be written again from the newer Release at once, not at its next event.
	return err
}

// writeSlices keeps the Release's ReleaseStatusSlices: members sorted by cluster, SliceSize each.
// Sharded, each replica writes slices of its own (named and labelled with its replicaHash), and the
// Release's owner deletes those of replicas no longer live once every member they name is
// reported by a live one (or by none: a member removed meanwhile).
func (c *Controller) writeSlices(ctx context.Context, rel *v1alpha1.Release, members []v1alpha1.ReleaseMemberStatus, others []*v1alpha1.ReleaseStatusSlice, ownsRelease bool) error {
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b v1alpha1.ReleaseMemberStatus) int { return cmp.Compare(a.Cluster, b.Cluster) })
	existing := map[string]*v1alpha1.ReleaseStatusSlice{}
	mine, _ := c.slicesOf(rel)
	for _, s := range mine {
		existing[s.Name] = s
	}
	client := c.registry.ClusterregistryV1alpha1().ReleaseStatusSlices(rel.Namespace)
	owner := metav1.NewControllerRef(rel, v1alpha1.SchemeGroupVersion.WithKind("Release"))
	prefix := rel.Name
	if c.replica != "" {
		prefix += "-" + c.replica
	}
	for i := 0; i*SliceSize < len(members); i++ {
		part := members[i*SliceSize : min((i+1)*SliceSize, len(members))]
		name := fmt.Sprintf("%s-%d", prefix, i)
		l := map[string]string{v1alpha1.ReleaseLabel: rel.Name, v1alpha1.SliceIndexLabel: strconv.Itoa(i)}
		if c.replica != "" {
			l[v1alpha1.ReplicaLabel] = c.replica
		}
		want := &v1alpha1.ReleaseStatusSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rel.Namespace, OwnerReferences: []metav1.OwnerReference{*owner}, Labels: l},
			Members:    part,
		}
		have := existing[name]
		delete(existing, name)
		switch {
		case have == nil:
			c.writes.Add(1)
			if _, err := client.Create(ctx, want, metav1.CreateOptions{}); err != nil && !kerrors.IsAlreadyExists(err) {
				return fmt.Errorf("writing ReleaseStatusSlice %s: %w", name, err)
			}
		case !apierrors.Semantic.DeepEqual(have.Members, want.Members) || !apierrors.Semantic.DeepEqual(have.Labels, want.Labels):
			upd := have.DeepCopy()
			upd.Members, upd.Labels = want.Members, want.Labels
			c.writes.Add(1)
			if _, err := client.Update(ctx, upd, metav1.UpdateOptions{}); err != nil && !kerrors.IsConflict(err) {
				return fmt.Errorf("writing ReleaseStatusSlice %s: %w", name, err)
			}
		}
	}
	if ownsRelease {
		// A slice of a replica no longer live goes once every member it names (with objects) is
		// in a live replica's slice: the member's new owner took it from there.
		live := c.live()
		reported := map[string]bool{}
		for _, m := range members {
			reported[m.Cluster] = true
		}
		for _, s := range others {
			if live[s.Labels[v1alpha1.ReplicaLabel]] {
				for _, m := range s.Members {
					reported[m.Cluster] = true
				}
			}
		}
		for _, s := range others {
			if live[s.Labels[v1alpha1.ReplicaLabel]] {
				continue
			}
			if !slices.ContainsFunc(s.Members, func(m v1alpha1.ReleaseMemberStatus) bool { return len(m.Objects) > 0 && !reported[m.Cluster] }) {
				existing[s.Name] = s
			}
		}
	}
	for name := range existing {
		c.writes.Add(1)
		if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !kerrors.IsNotFound(err) {
			return fmt.Errorf("deleting ReleaseStatusSlice %s: %w", name, err)
		}
	}
	return nil
}

// refusedReferences says which references of a decision were refused, and why.
func refusedReferences(refs []cpv1alpha1.ClusterProfileReference) string {
	names := make([]string, 0, min(len(refs), 3))
	for _, r := range refs[:min(len(refs), 3)] {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	more := ""
	if len(refs) > 3 {
		more = fmt.Sprintf(" and %d more", len(refs)-3)
	}
	return fmt.Sprintf("the decision names %d Clusters of other cluster sets (%s%s), refused: a Release reaches only its own set's members",
		len(refs), strings.Join(names, ", "), more)
}
