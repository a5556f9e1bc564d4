package delivery

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/internal/safetext"
)

// setConditions sets a Release's Stalled, Progressing, Available and Degraded conditions from a
// pass's plan and the member counts written beside them, so that no condition says what another,
// or the wave counter, contradicts: Complete only when every chosen member is Ready at the
// revision; a stopped rollout names the wave it stopped in, which is the counter's.
func setConditions(status *v1alpha1.ReleaseStatus, rel *v1alpha1.Release, dec *decision.Decision, p progress, counts map[v1alpha1.ReleaseMemberPhase]int32, worst []v1alpha1.ReleaseMemberStatus) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason,
			Message: safetext.OneLine(msg, 1024), ObservedGeneration: rel.Generation})
	}
	pl := p.plan
	stopped := pl != nil && pl.stopped
	switch {
	case p.stalledReason != "":
		set(v1alpha1.ReleaseStalled, metav1.ConditionTrue, p.stalledReason, p.stalledMessage)
	case stopped:
		set(v1alpha1.ReleaseStalled, metav1.ConditionTrue, "TooManyFailures", stoppedMessage(pl, MaxFailures(rel.Spec.Rollout, int(status.Members))))
	default:
		set(v1alpha1.ReleaseStalled, metav1.ConditionFalse, "NotStalled", "")
	}
	if stalled := meta.FindStatusCondition(status.Conditions, v1alpha1.ReleaseStalled); p.note != "" && stalled.Status == metav1.ConditionTrue {
		set(v1alpha1.ReleaseStalled, stalled.Status, stalled.Reason, stalled.Message+"; "+p.note)
	}
	busy := counts[v1alpha1.PhasePending] + counts[v1alpha1.PhaseApplying] + counts[v1alpha1.PhaseProgressing] + counts[v1alpha1.PhaseRemoving]
	switch {
	case p.stalledReason != "" || stopped:
		set(v1alpha1.ReleaseProgressing, metav1.ConditionFalse, "Stopped", "see Stalled")
	case pl == nil:
		// Not planned (finalizing): the members' removal is what progresses.
		set(v1alpha1.ReleaseProgressing, metav1.ConditionTrue, "Removing", "see Stalled")
	case pl.awaiting > 0:
		set(v1alpha1.ReleaseProgressing, metav1.ConditionTrue, "AwaitingApproval", fmt.Sprintf("wave %d of %d of revision %s awaits approval: clusterregistry rollout approve release/%s; %d of %d members ready",
			pl.awaiting, status.Waves, status.Revision, rel.Name, status.Ready, status.Members))
	case busy > 0 || !pl.done:
		set(v1alpha1.ReleaseProgressing, metav1.ConditionTrue, "RollingOut", fmt.Sprintf("wave %d of %d; %d of %d members ready", status.Wave, status.Waves, status.Ready, status.Members))
	case status.Ready == status.Members:
		set(v1alpha1.ReleaseProgressing, metav1.ConditionFalse, "Complete", fmt.Sprintf("%d of %d members ready", status.Ready, status.Members))
	default:
		set(v1alpha1.ReleaseProgressing, metav1.ConditionFalse, "Finished", fmt.Sprintf("every wave is done, %d of %d members ready: see Degraded", status.Ready, status.Members))
	}
	setAvailable(status, rel, dec, p, set)
	if bad := counts[v1alpha1.PhaseFailed] + counts[v1alpha1.PhaseUnreachable] + counts[v1alpha1.PhaseDrifted] + counts[v1alpha1.PhaseDegraded]; bad > 0 {
		msg := fmt.Sprintf("%d failed, %d unreachable, %d drifted", counts[v1alpha1.PhaseFailed], counts[v1alpha1.PhaseUnreachable], counts[v1alpha1.PhaseDrifted])
		if n := counts[v1alpha1.PhaseDegraded]; n > 0 {
			msg += fmt.Sprintf(", %d lost their health after they were Ready at the revision (phase Degraded; no failure of the rollout)", n)
		}
		set(v1alpha1.ReleaseDegraded, metav1.ConditionTrue, string(worst[0].Phase), msg)
	} else {
		set(v1alpha1.ReleaseDegraded, metav1.ConditionFalse, "NotDegraded", "")
	}
}

// setAvailable sets Available. Without a decision it is Unknown only when the decision is what
// cannot be read: a source that does not render, or a suspended Release, changes nothing on the
// members, so Available stays as it was.
func setAvailable(status *v1alpha1.ReleaseStatus, rel *v1alpha1.Release, dec *decision.Decision, p progress, set func(t string, s metav1.ConditionStatus, reason, msg string)) {
	revision := status.Revision
	switch {
	case dec == nil && p.stalledReason != "DecisionNotFound" && p.stalledReason != "DecisionsUnavailable":
		if have := meta.FindStatusCondition(status.Conditions, v1alpha1.ReleaseAvailable); have == nil {
			set(v1alpha1.ReleaseAvailable, metav1.ConditionUnknown, p.stalledReason, "not known until the Release is delivered: see Stalled")
		}
	case dec == nil:
		set(v1alpha1.ReleaseAvailable, metav1.ConditionUnknown, "NoDecision", "the decision cannot be read, so whether the members run the Release is not known: see Stalled")
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
}

// stoppedMessage says why a rollout stopped, naming the failed members and the wave it stopped
// in: the counter's wave.
func stoppedMessage(pl *plan, maxFailures int) string {
	if pl.recorded != nil && len(pl.failed) <= maxFailures {
		// The failed members left, or were excluded: the stop stands as it was recorded.
		return pl.recorded.Message + "; the stop is recorded and holds until the spec changes or rollout restart"
	}
	msg := fmt.Sprintf("%d members failed (%s), more than maxFailures (%d) allows: the rollout stopped in wave %d of %d",
		len(pl.failed), namesOf(pl.failed, 5), maxFailures, pl.wave, pl.waves)
	if pl.wave < pl.waves {
		msg += fmt.Sprintf("; wave %d does not begin", pl.wave+1)
	}
	return msg
}

// namesOf names up to n members, and how many more there are.
func namesOf(keys []types.NamespacedName, n int) string {
	names := make([]string, 0, min(len(keys), n))
	for _, k := range keys[:min(len(keys), n)] {
		names = append(names, k.Name)
	}
	if len(keys) > n {
		names = append(names, fmt.Sprintf("and %d more", len(keys)-n))
	}
	return strings.Join(names, ", ")
}
