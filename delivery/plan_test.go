package delivery

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
)

// rollout is a simulated Release on simulated members: what decide is asked about, step after
// step, as members apply, fail, become healthy and unhealthy, time passes and the Release changes.
type rollout struct {
	t        *testing.T
	rng      *rand.Rand
	snap     snapshot
	order    map[types.NamespacedName]int // each member's wave
	revision int
	// started is the highest wave in which a member was first applied at the revision.
	started int
	// churn, when set, has members leave the decision (for their health or deliberately), join
	// it and come back (membership_test.go); nil keeps the decision as it began.
	churn *churn
	// stoppedAt is the revision whose rollout stopped, as the test saw it.
	stoppedAt string
}

func newRollout(t *testing.T, seed uint64) *rollout {
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 1 + rng.IntN(8)
	members := names(n)
	groups := map[types.NamespacedName]int{}
	for _, k := range members {
		if rng.IntN(5) > 0 { // some have no group: they go last
			groups[k] = rng.IntN(3)
		}
	}
	strategy := []v1alpha1.ReleaseRolloutStrategy{v1alpha1.RolloutAll, v1alpha1.RolloutGroups, v1alpha1.RolloutConcurrency}[rng.IntN(3)]
	r := &rollout{t: t, rng: rng, order: map[types.NamespacedName]int{}, started: -1}
	r.churn = &churn{members: members, groups: groups, strategy: strategy}
	waves := Waves(members, groups, &v1alpha1.ReleaseRollout{Strategy: strategy})
	for i, w := range waves {
		for _, k := range w {
			r.order[k] = i
		}
	}
	r.snap = snapshot{now: time.Unix(1_000_000, 0), revision: "r0", waves: waves, views: map[types.NamespacedName]view{},
		own: map[types.NamespacedName]view{}, mine: map[types.NamespacedName]bool{}, fresh: true,
		gates: gates{soak: time.Duration(rng.IntN(4)) * time.Second, deadline: time.Duration(5+rng.IntN(10)) * time.Second,
			retryAfter: 4 * time.Second, maxFailures: rng.IntN(3), correctDrift: rng.IntN(2) == 0}}
	for _, k := range members {
		r.snap.mine[k] = true
	}
	if rng.IntN(3) == 0 {
		r.snap.gates.manual, r.snap.gates.approved = true, rng.IntN(len(waves)+1)
	}
	return r
}

// step asks decide, checks the plan against the invariants, acts on it as members would answer,
// then lets something happen.
func (r *rollout) step(i int) {
	s := r.snapshot()
	p := decide(s)
	r.check(s, p, i)
	r.churn.acted(r, s, p, i)
	for _, k := range p.settled { // recordSettled
		v := r.snap.views[k]
		v.settled = true
		r.snap.views[k] = v
	}
	for _, k := range p.apply {
		v := r.snap.views[k]
		if !r.snap.tried(v) {
			if !r.churn.moved {
				require.GreaterOrEqual(r.t, r.order[k], r.started, "step %d: %s first applied in wave %d after wave %d began", i, k.Name, r.order[k], r.started)
			}
			r.started = max(r.started, r.order[k])
		}
		if r.rng.IntN(5) == 0 {
			v.known, v.err, v.failedRev, v.failedAt = true, &memberError{class: v1alpha1.FailureInvalid, err: fmt.Errorf("refused")}, r.snap.revision, r.snap.now
			v.attempts++
		} else {
			v = view{known: true, revision: r.snap.revision, applied: r.snap.now, notCurrent: &applied{status: "InProgress"}}
		}
		r.snap.views[k] = v
	}
	r.happen()
}

// happen is one thing that happens: a member becomes healthy, fails, drifts; time passes; the
// Release changes.
func (r *rollout) happen() {
	keys := sortedKeys(r.snap.mine)
	if r.churn.on {
		keys = r.churn.members
	}
	k := keys[r.rng.IntN(len(keys))]
	v := r.snap.views[k]
	events := 8
	if r.churn.on {
		events = 12
	}
	switch e := r.rng.IntN(events); e {
	case 0, 1, 2:
		if v.known && v.err == nil && v.readyAt.IsZero() {
			v.readyAt, v.notCurrent = r.snap.now, nil
		}
	case 3:
		if v.known && v.err == nil {
			v.readyAt, v.notCurrent = time.Time{}, &applied{status: "Failed", message: "crashed"}
		}
	case 4:
		if v.known && v.err == nil {
			v.drifted = true
		}
	case 5:
		if r.rng.IntN(6) == 0 { // a new revision: the rollout starts again from the first wave
			r.revision++
			r.snap.revision, r.started = fmt.Sprintf("r%d", r.revision), -1
			r.snap.gates.approved = 0 // approvals are of a revision
			r.snap.stop, r.churn.moved = nil, false
		}
	case 6:
		r.snap.gates.approved++ // someone approves the next wave
	case 7:
		// A member that was Ready loses its health, as when its Nodes die under its Pods; a
		// later event 0-2 brings it back.
		if v.known && v.err == nil && !v.readyAt.IsZero() {
			v.readyAt, v.notCurrent = time.Time{}, &applied{status: "InProgress", message: "Available: 0/2 replicas"}
		}
	case 8, 9, 10, 11:
		r.churn.happen(r, k, e)
	}
	if v.known {
		r.snap.views[k] = v
	}
	r.snap.now = r.snap.now.Add(time.Duration(r.rng.IntN(3000)) * time.Millisecond)
}

// check holds a plan of snapshot s to the invariants.
func (r *rollout) check(s snapshot, p plan, i int) {
	// A wave begins only when every earlier wave's member is Ready at the revision for the
	// soak, or failed at it and not due to be tried again; never past maxFailures.
	for _, k := range p.apply {
		if s.tried(s.views[k]) {
			continue
		}
		for _, w := range s.waves[:r.order[k]] {
			for _, e := range w {
				ev := s.views[e]
				soaked := s.readyAt(ev) && !s.now.Before(ev.readyAt.Add(s.gates.soak))
				require.True(r.t, soaked || s.settledAt(ev) || (s.failedAt(ev) && s.retryDue(ev) != 0),
					"step %d: %s (wave %d) applied while %s of an earlier wave is %+v", i, k.Name, r.order[k], e.Name, ev)
			}
		}
		if p.stopped {
			require.True(r.t, s.begun(s.waves[r.order[k]]), "step %d: wave %d began past maxFailures", i, r.order[k])
		}
		if s.gates.manual {
			require.LessOrEqual(r.t, r.order[k]+1, s.gates.approved, "step %d: wave %d began unapproved", i, r.order[k]+1)
		}
	}
	// Failures are the members that failed at this revision, never before it.
	failed := 0
	for k, v := range s.views {
		if v.err != nil && v.failedRev != s.revision {
			require.NotContains(r.t, p.failed, k, "step %d: an older revision's failure counted", i)
		}
		if s.settledAt(v) {
			// Finished its wave at the revision: whatever its health now, no failure.
			require.NotContains(r.t, p.failed, k, "step %d: %s finished its wave, and its later loss of health counted as a failure", i, k.Name)
			if !s.readyAt(v) && !v.applying && (v.err == nil || !v1alpha1.Unreachable(v.err.class)) && !(v.err == nil && v.drifted) {
				require.Equal(r.t, v1alpha1.PhaseDegraded, p.judged[k].phase, "step %d: %s lost its health after its wave", i, k.Name)
			}
			continue
		}
		if (v.err != nil && v.failedRev == s.revision) || (v.err == nil && v.revision == s.revision && v.readyAt.IsZero() &&
			((v.notCurrent != nil && v.notCurrent.status == "Failed") || s.now.Sub(v.applied) > s.gates.deadline)) {
			failed++
		}
	}
	for _, k := range s.leaving { // left for its health mid-rollout: a failure too
		if _, departed := p.departed[k]; departed && s.tried(s.own[k]) && !s.readyAt(s.own[k]) && !s.settledAt(s.own[k]) {
			failed++
		}
	}
	require.Len(r.t, p.failed, failed, "step %d", i)
	require.Equal(r.t, failed > s.gates.maxFailures || s.stop != nil, p.stopped, "step %d", i)

	// The counter is the wave the rollout is in: every wave with a member tried has begun.
	if len(s.waves) > 0 {
		require.GreaterOrEqual(r.t, p.wave, 1)
		require.LessOrEqual(r.t, p.wave, len(s.waves))
		for w, members := range s.waves {
			if s.begun(members) {
				require.GreaterOrEqual(r.t, p.wave, w+1, "step %d: wave %d began, the counter says %d", i, w+1, p.wave)
			}
		}
	}

	// The conditions, written from the plan and the counts of its judgements, agree.
	status := r.status(s, p)
	progressing := meta.FindStatusCondition(status.Conditions, v1alpha1.ReleaseProgressing)
	stalled := meta.FindStatusCondition(status.Conditions, v1alpha1.ReleaseStalled)
	if progressing.Reason == "Complete" {
		for k, w := range s.waves {
			for _, m := range w {
				require.True(r.t, s.readyAt(s.views[m]), "step %d: Complete, but %s (wave %d) is %+v", i, m.Name, k+1, s.views[m])
			}
		}
	}
	require.Equal(r.t, p.stopped, stalled.Status == metav1.ConditionTrue, "step %d", i)
	if p.stopped && failed > s.gates.maxFailures {
		require.Contains(r.t, stalled.Message, fmt.Sprintf("stopped in wave %d of %d", status.Wave, status.Waves))
	}
	if p.stopped {
		require.Equal(r.t, metav1.ConditionFalse, progressing.Status)
	}
}

// status is the status setConditions writes for a plan, its counts from the plan's judgements.
func (r *rollout) status(s snapshot, p plan) v1alpha1.ReleaseStatus {
	counts := map[v1alpha1.ReleaseMemberPhase]int32{}
	var worst []v1alpha1.ReleaseMemberStatus
	for k, j := range p.judged {
		counts[j.phase]++
		if j.phase != v1alpha1.PhaseReady {
			worst = append(worst, v1alpha1.ReleaseMemberStatus{Cluster: k.Name, Phase: j.phase})
		}
	}
	status := v1alpha1.ReleaseStatus{Members: int32(len(p.judged)), Ready: counts[v1alpha1.PhaseReady], Wave: int32(p.wave), Waves: int32(p.waves)}
	rel := &v1alpha1.Release{Spec: v1alpha1.ReleaseSpec{Rollout: &v1alpha1.ReleaseRollout{MaxFailures: ptr.To(intstr.FromInt(s.gates.maxFailures))}}}
	setConditions(&status, rel, &decision.Decision{}, progress{snap: &s, plan: &p}, counts, worst)
	return status
}

// Over generated sequences of member events and Release changes, every plan keeps the rollout's
// promises: waves begin in order and only past the gates, stale failures never count, the wave
// counter and every condition agree, Complete means every member Ready.
func TestPlanInvariants(t *testing.T) {
	for seed := range uint64(400) {
		r := newRollout(t, seed)
		for i := range 60 {
			r.step(i)
		}
	}
}

// Issue 74's defect: a revision that completed, three waves of it, was stopped for good when one
// member's Nodes died days later (its Deployment no longer Available): the progress deadline,
// counted from an apply long past, made it Failed, the rollout Stalled in wave 3 of 3, and with
// onFailure Rollback a rollback of the whole fleet would have begun. A member that finished its
// wave is Degraded instead, stops nothing, and is Ready again once healthy; one still soaking in
// its wave when it loses health is still held to its deadline.
func TestHealthLostAfterTheWaveIsNoFailure(t *testing.T) {
	ms := names(3)
	now := time.Unix(1_000_000, 0)
	s := snapshot{now: now, revision: "r2", waves: [][]types.NamespacedName{{ms[0]}, {ms[1]}, {ms[2]}},
		views: map[types.NamespacedName]view{}, mine: map[types.NamespacedName]bool{ms[0]: true, ms[1]: true, ms[2]: true},
		fresh: true, gates: gates{soak: 2 * time.Second, deadline: time.Minute, retryAfter: 30 * time.Second}}
	for _, k := range ms {
		s.views[k] = view{known: true, revision: "r2", applied: now.Add(-72 * time.Hour), readyAt: now.Add(-71 * time.Hour)}
	}
	p := decide(s)
	require.True(t, p.done)
	require.Equal(t, ms, p.settled, "every member finished its wave")
	for _, k := range ms {
		v := s.views[k]
		v.settled = true
		s.views[k] = v
	}
	require.Empty(t, decide(s).settled, "recorded once")

	lost := s.views[ms[1]]
	lost.readyAt, lost.notCurrent = time.Time{}, &applied{ref: ref{Kind: "Deployment", Namespace: "shop", Name: "web"}, status: "InProgress", message: "Available: 0/2 replicas"}
	s.views[ms[1]] = lost
	p = decide(s)
	require.False(t, p.stopped, "a member's loss of health after its wave stopped the rollout")
	require.Empty(t, p.failed)
	require.True(t, p.done, "the finished waves stay finished")
	require.Empty(t, p.apply)
	require.Zero(t, p.wait, "no deadline to look again at")
	require.Equal(t, v1alpha1.PhaseDegraded, p.judged[ms[1]].phase)
	require.Equal(t, "HealthLost", p.judged[ms[1]].reason)
	require.Contains(t, p.judged[ms[1]].message, "Deployment shop/web is InProgress: Available: 0/2 replicas")
	st := (&rollout{snap: s}).status(s, p)
	require.Equal(t, metav1.ConditionFalse, meta.FindStatusCondition(st.Conditions, v1alpha1.ReleaseStalled).Status)
	require.Equal(t, metav1.ConditionFalse, meta.FindStatusCondition(st.Conditions, v1alpha1.ReleaseAvailable).Status)
	degraded := meta.FindStatusCondition(st.Conditions, v1alpha1.ReleaseDegraded)
	require.Equal(t, metav1.ConditionTrue, degraded.Status)
	require.Equal(t, string(v1alpha1.PhaseDegraded), degraded.Reason)
	progressing := meta.FindStatusCondition(st.Conditions, v1alpha1.ReleaseProgressing)
	require.Equal(t, metav1.ConditionFalse, progressing.Status, "a finished revision is not RollingOut again")

	// Healthy again: Ready, Complete, by itself.
	lost.readyAt, lost.notCurrent = now, nil
	s.views[ms[1]] = lost
	s.now = now.Add(time.Minute)
	p = decide(s)
	require.Equal(t, v1alpha1.PhaseReady, p.judged[ms[1]].phase)
	require.Equal(t, "Complete", meta.FindStatusCondition((&rollout{snap: s}).status(s, p).Conditions, v1alpha1.ReleaseProgressing).Reason)

	// While a later wave rolls out, an earlier wave's member that finished and then lost its
	// health holds nothing back: the next wave begins.
	s.views[ms[1]] = lost
	s.views[ms[2]] = view{}
	lost.readyAt, lost.notCurrent = time.Time{}, &applied{status: "InProgress"}
	s.views[ms[1]] = lost
	p = decide(s)
	require.Equal(t, []types.NamespacedName{ms[2]}, p.apply, "wave 3 begins")
	require.False(t, p.stopped)

	// A member still soaking in its wave when it loses health has not finished it: its
	// deadline, from its apply, still holds.
	soaking := view{known: true, revision: "r2", applied: now.Add(-2 * time.Minute), notCurrent: &applied{status: "InProgress"}}
	s.views[ms[2]] = soaking
	p = decide(s)
	require.Equal(t, []types.NamespacedName{ms[2]}, p.failed, "past its deadline without finishing its wave")
	require.Equal(t, v1alpha1.FailureTimeout, p.judged[ms[2]].reason)
}

// The defects a walk-through found, each as the plan decided it before.
func TestPlanDefects(t *testing.T) {
	ms := names(3)
	base := func() snapshot {
		return snapshot{now: time.Unix(1000, 0), revision: "new", waves: [][]types.NamespacedName{{ms[0]}, {ms[1]}, {ms[2]}},
			views: map[types.NamespacedName]view{}, mine: map[types.NamespacedName]bool{ms[0]: true, ms[1]: true, ms[2]: true},
			fresh: true, gates: gates{deadline: time.Minute, retryAfter: 30 * time.Second}}
	}
	failed := func(s snapshot) view {
		return view{known: true, revision: "old", err: &memberError{class: v1alpha1.FailureInvalid, err: fmt.Errorf("namespace not found")},
			failedRev: s.revision, failedAt: s.now.Add(-time.Minute), attempts: 3}
	}

	// Every member failed, with the default rollout (All, maxFailures 0): stalled, never Complete.
	s := base()
	s.waves = [][]types.NamespacedName{ms}
	for _, k := range ms {
		v := failed(s)
		v.failedAt = s.now
		s.views[k] = v
	}
	p := decide(s)
	require.True(t, p.stopped)
	r := &rollout{snap: s}
	st := r.status(s, p)
	require.Equal(t, "Stopped", meta.FindStatusCondition(st.Conditions, v1alpha1.ReleaseProgressing).Reason)
	require.Contains(t, meta.FindStatusCondition(st.Conditions, v1alpha1.ReleaseStalled).Message, "3 members failed (m00, m01, m02), more than maxFailures (0) allows: the rollout stopped in wave 1 of 1")

	// A failed member whose retry is due holds its wave open: the next wave does not begin in the
	// same pass as the retry (with maxFailures 1, which tolerated the failure until now).
	s = base()
	s.gates.maxFailures = 1
	s.views[ms[0]] = failed(s)
	p = decide(s)
	require.Equal(t, []types.NamespacedName{ms[0]}, p.apply, "only the retry")
	require.Equal(t, 1, p.wave)

	// A retry comes soon after the failure (a cause fixed elsewhere), not after retryAfter.
	s = base()
	v := failed(s)
	v.failedAt, v.attempts = s.now, 1
	s.views[ms[0]] = v
	p = decide(s)
	require.Empty(t, p.apply)
	require.Equal(t, time.Second, p.wait)

	// A stopped rollout's counter is the wave it stopped in, as Stalled says.
	s = base()
	v = failed(s)
	v.failedAt = s.now
	s.views[ms[0]] = v
	p = decide(s)
	require.True(t, p.stopped)
	require.Equal(t, 1, p.wave)
	require.Contains(t, stoppedMessage(&p, 0), "stopped in wave 1 of 3; wave 2 does not begin")
	require.Equal(t, "RolloutStopped", p.judged[ms[1]].reason)

	// Drift Ignore neither reports nor corrects; a restart (resync) applies again every member
	// whose wave began, whatever the policy.
	s = base()
	s.gates.ignoreDrift = true
	for _, k := range ms {
		s.views[k] = view{known: true, revision: "new", readyAt: s.now.Add(-time.Hour), drifted: true}
	}
	p = decide(s)
	require.Empty(t, p.apply)
	require.Equal(t, v1alpha1.PhaseReady, p.judged[ms[0]].phase)
	s.resync = true
	p = decide(s)
	require.Equal(t, ms, p.apply)
}

// Events are news: a plan that says what the last one said tells nothing, the first plan of a
// Release (a restart) tells nothing, and each change is told once.
func TestEventsOnlyOnChange(t *testing.T) {
	for seed := range uint64(200) {
		r := newRollout(t, seed/2)
		if seed%2 == 1 { // members leave and come back too
			r.withChurn()
		}
		var before *told
		for i := range 40 {
			p := decide(r.snapshot())
			now := toldOf(r.snapshot(), p)
			if before == nil {
				require.Empty(t, news(before, now, p), "a first plan told")
			}
			again := now
			require.Empty(t, news(&again, now, p), "seed %d step %d: the same plan told again", seed, i)
			for _, e := range news(before, now, p) {
				if e.reason == EventRolloutComplete {
					require.True(t, now.complete && (before == nil || !before.complete || before.revision != now.revision))
				}
			}
			before = &now
			r.step(i)
		}
	}
}

// A revision is told complete once: a member that loses its health after its wave (Degraded) and
// comes back completes nothing again.
func TestRolloutCompleteIsToldOnce(t *testing.T) {
	complete := told{revision: "r2", complete: true, completed: true}
	degraded := told{revision: "r2", completed: true} // as tell carries it
	again := told{revision: "r2", complete: true}
	require.Empty(t, news(&degraded, again, plan{}), "RolloutComplete told again after a loss of health")
	require.Len(t, news(&told{revision: "r1", complete: true, completed: true}, complete, plan{}), 2, "a new revision: started, and complete")
}

// BenchmarkDecide is one pass's planning over 10,000 members in 40 waves of 250, midway through a
// rollout (half the waves done and soaked, the open wave progressing, a few failed): the pure part
// of every pass, which runs on each member event. It reports the cost per member.
func BenchmarkDecide(b *testing.B) {
	const n, waveSize = 10_000, 250
	members := names(n)
	groups := map[types.NamespacedName]int{}
	for i, k := range members {
		groups[k] = i / waveSize
	}
	s := snapshot{now: time.Unix(1_000_000, 0), revision: "new", views: map[types.NamespacedName]view{}, mine: map[types.NamespacedName]bool{},
		fresh: true, gates: gates{soak: time.Minute, deadline: 10 * time.Minute, retryAfter: 30 * time.Second, maxFailures: 100}}
	s.waves = Waves(members, groups, &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups})
	for i, k := range members {
		s.mine[k] = true
		switch {
		case i < n/2:
			s.views[k] = view{known: true, revision: "new", applied: s.now.Add(-time.Hour), readyAt: s.now.Add(-time.Hour)}
		case i < n/2+waveSize:
			s.views[k] = view{known: true, revision: "new", applied: s.now.Add(-time.Minute), notCurrent: &applied{status: "InProgress"}}
			if i%50 == 0 {
				s.views[k] = view{known: true, revision: "old", err: &memberError{class: v1alpha1.FailureInvalid, err: fmt.Errorf("refused")},
					failedRev: "new", failedAt: s.now, attempts: 1}
			}
		default:
			s.views[k] = view{known: true, revision: "old", applied: s.now.Add(-48 * time.Hour), readyAt: s.now.Add(-48 * time.Hour)}
		}
	}
	var p plan
	b.ReportAllocs()
	for b.Loop() {
		p = decide(s)
	}
	require.Equal(b, 21, p.wave)
	require.Len(b, p.failed, waveSize/50)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/member")
}

// A source that does not render, or a suspended Release, changes nothing on the members: Available
// stays as it was (it read Unknown NoDecision although the decision was fine). A decision that
// cannot be read makes it Unknown.
func TestAvailableKeptWhileTheSourceDoesNotRender(t *testing.T) {
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2}}
	status := v1alpha1.ReleaseStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ReleaseAvailable, Status: metav1.ConditionTrue, Reason: "AllReady", ObservedGeneration: 1}}}
	for _, reason := range []string{"InvalidSource", "Suspended", "ChartUnavailable"} {
		st := *status.DeepCopy()
		setConditions(&st, rel, nil, progress{stalledReason: reason, stalledMessage: "x"}, map[v1alpha1.ReleaseMemberPhase]int32{}, nil)
		available := meta.FindStatusCondition(st.Conditions, v1alpha1.ReleaseAvailable)
		require.Equal(t, metav1.ConditionTrue, available.Status, reason)
		require.Equal(t, "AllReady", available.Reason, reason)
	}
	for _, reason := range []string{"DecisionNotFound", "DecisionsUnavailable"} {
		st := *status.DeepCopy()
		setConditions(&st, rel, nil, progress{stalledReason: reason, stalledMessage: "x"}, map[v1alpha1.ReleaseMemberPhase]int32{}, nil)
		require.Equal(t, metav1.ConditionUnknown, meta.FindStatusCondition(st.Conditions, v1alpha1.ReleaseAvailable).Status, reason)
	}
}
