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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/internal/safetext"
)

// SliceSize is how many members a ReleaseStatusSlice holds at most.
const SliceSize = 100

// progress is what status is written from: the pass's snapshot and plan (nil when the pass
// stopped before planning: a source that does not render, a decision that cannot be read), or
// why the Release is stalled.
type progress struct {
	snap           *snapshot
	plan           *plan
	stalledReason  string
	stalledMessage string
	// note is said after Stalled's message, whatever set it.
	note string
}

// badness orders phases from worst to best, for Release.status.worst.
var badness = []v1alpha1.ReleaseMemberPhase{
	v1alpha1.PhaseFailed, v1alpha1.PhaseUnreachable, v1alpha1.PhaseDegraded, v1alpha1.PhaseDrifted, v1alpha1.PhaseRemoving, v1alpha1.PhaseDeparted,
	v1alpha1.PhaseProgressing, v1alpha1.PhaseApplying, v1alpha1.PhasePending, v1alpha1.PhaseReady,
}

// memberStatus is how the Release stands on a member, as a view and its judgement say.
func memberStatus(key types.NamespacedName, v view, j judgement) v1alpha1.ReleaseMemberStatus {
	out := v1alpha1.ReleaseMemberStatus{Cluster: key.Name, Revision: v.memberRevision, Objects: v.objects, Feedback: v.feedback,
		Shares: v.shares, Phase: j.phase, Reason: j.reason, Message: j.message}
	if !v.applied.IsZero() {
		t := metav1.NewTime(v.applied.Truncate(time.Second))
		out.LastApplied = &t
	}
	return out
}

// leaving is the judgement of a member the decision no longer names (or of a Release being
// deleted): its objects are being removed.
func leaving(v view, deleting bool) judgement {
	j := judgement{phase: v1alpha1.PhaseRemoving, reason: "LeftDecision"}
	if deleting {
		j.reason = "ReleaseDeleted"
	}
	if v.err != nil {
		j.message = safetext.OneLine(v.err.Error(), 1024)
	}
	return j
}

// judgeOwn judges a member this replica reports, as the plan does: a member the plan says will
// not begin its wave is RolloutStopped; one it holds for an approval or a dependency says so.
func (p progress) judgeOwn(key types.NamespacedName, v view) judgement {
	if v.removing {
		return leaving(v, false)
	}
	if j := p.plan.judged[key]; j.reason == "AwaitingApproval" || j.reason == "DependencyNotReady" {
		return j
	}
	return p.snap.judge(v, p.plan.judged[key].reason == "RolloutStopped")
}

// writeStatus writes the Release's status and slices, each only when it changed.
func (c *Controller) writeStatus(ctx context.Context, rel *v1alpha1.Release, b *Bundle, dec *decision.Decision, p progress) error {
	status := v1alpha1.ReleaseStatus{ObservedGeneration: rel.Generation, Conditions: slices.Clone(rel.Status.Conditions)}
	revision := rel.Status.Revision
	status.Chart = rel.Status.Chart
	if b != nil {
		revision = b.Revision
		status.Chart = b.chartStatus()
	}
	status.Revision, status.Divisions = revision, rel.Status.Divisions
	if b != nil && (b.divided || len(b.divisions) == 0) {
		status.Divisions = b.plans // none without a Capacity division
	}
	status.LastCompleteRevision = rel.Status.LastCompleteRevision
	if b != nil && p.plan != nil && complete(*p.plan) {
		status.LastCompleteRevision = b.Revision
	}
	relKey := types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}
	ownsRelease := c.owns(relKey)
	_, others := c.slicesOf(rel)
	reps := c.reports(others, c.live())
	mine, members := c.memberStatuses(rel, dec, p, reps)
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
	if p.plan != nil && p.plan.waves > 0 {
		status.Waves, status.Wave = int32(p.plan.waves), int32(p.plan.wave)
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
	setConditions(&status, rel, dec, p, counts, worst)

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

// sortedKeys are a map's keys in order.
func sortedKeys[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return cmp.Compare(a.String(), b.String()) })
	return out
}

// memberStatuses are the members this replica reports in its slices (mine: those it owns, and
// those it holds until their new owner reports them) and the Release's (mine, and the other
// replicas' reports of the rest), judged from the pass's snapshot and plan.
func (c *Controller) memberStatuses(rel *v1alpha1.Release, dec *decision.Decision, p progress, reps map[types.NamespacedName]report) (mine, members []v1alpha1.ReleaseMemberStatus) {
	deleting := rel.DeletionTimestamp != nil
	named := map[types.NamespacedName]bool{}
	if dec != nil && p.plan != nil {
		for _, k := range dec.Clusters {
			named[k] = true
			v, held := p.snap.own[k]
			var m v1alpha1.ReleaseMemberStatus
			if c.owns(k) || held {
				m = memberStatus(k, v, p.judgeOwn(k, v))
				mine = append(mine, m)
			}
			if r, ok := reps[k]; ok && (!c.owns(k) || !held) {
				m = *r.status
			} else if m.Cluster == "" {
				m = memberStatus(k, view{}, p.judgeOwn(k, view{})) // nobody reports it yet
			}
			members = append(members, m)
		}
	}
	if p.snap != nil && (dec != nil || deleting) {
		for _, k := range sortedKeys(p.snap.own) {
			if named[k] {
				continue
			}
			v := p.snap.own[k]
			j := leaving(v, deleting)
			if p.plan != nil && p.plan.held {
				j = p.judgeOwn(k, v) // nothing is removed: they keep their phases
			}
			d, departed := departure{}, false
			if p.plan != nil && !deleting {
				d, departed = p.plan.departed[k]
			}
			if departed && !v.removing {
				j = departedJudgement(d)
			}
			m := memberStatus(k, v, j)
			if departed {
				at := metav1.NewTime(d.since.Truncate(time.Second))
				m.DepartedAt = &at
			}
			mine = append(mine, m)
			members = append(members, m)
		}
	}
	for k, r := range reps {
		if !named[k] && (dec != nil || deleting) && len(r.status.Objects) > 0 && !slices.ContainsFunc(mine, func(m v1alpha1.ReleaseMemberStatus) bool { return m.Cluster == k.Name }) {
			members = append(members, *r.status)
		}
	}
	if dec == nil && !deleting {
		// Without a decision, the members' status stands as last written.
		return nil, nil
	}
	return mine, members

}
