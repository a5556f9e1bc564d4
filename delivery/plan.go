package delivery

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/safetext"
)

// A pass over a Release reads as plan, act, report: snapshot copies what the Controller knows of
// the Release's members (under its lock), decide works out from that copy alone what to do and
// how the rollout stands, the applier and remover act on the plan's lists, and the status is
// written from a plan (of the snapshot taken after acting, when the pass acted). Nothing decides
// twice: the waves, the failures, each member's phase and every condition come from one plan.

// view is one member of a Release as a pass sees it: a copy of its memberState, so that deciding
// reads no memory another goroutine writes.
type view struct {
	known bool // the Controller has a state for the member (it applied there, or is told of it)
	// revision is what the member runs, as the plan compares it (viewOf); memberRevision as its
	// objects' labels and status name it.
	revision       string
	memberRevision string
	applied        time.Time
	readyAt        time.Time // zero: not every object Current at revision
	applying       bool
	removing       bool
	drifted        bool
	drift          string // what drifted, for the member's message
	err            *memberError
	failedRev      string
	failedAt       time.Time
	attempts       int      // failed applies in a row, for the retry's backoff
	notCurrent     *applied // the first object (by name) that is not Current, if any
	// objects are its objects as status lists them, by name; feedback what spec.feedback read
	// from them.
	objects  []v1alpha1.ReleaseObjectStatus
	feedback []v1alpha1.ReleaseFeedbackValue
	shares   []v1alpha1.ReleaseMemberShare // of spec.divide, as it was last applied
	// departedAt is when the member left the decision for its health; zero otherwise.
	departedAt time.Time
	// settled: the member finished its wave at the revision it runs (memberState.settled).
	settled bool
}

// viewOf copies a member's state, with c.mu held. base is the Release's revision the pass
// delivers and want the member's (base, with the overrides that choose it; "" when this replica
// cannot tell, sharded, for another replica's member): the view says base where the member runs,
// or failed at, what it should, so that the plan compares every member with base alone.
func viewOf(ms *memberState, base, want string) view {
	if ms == nil {
		return view{}
	}
	at := func(r string) string {
		switch {
		case r == "":
			return r
		case r == want || (want == "" && ofRevision(r, base)):
			return base
		case r == base:
			return base + "-" // what the member ran before an override chose it: not base now
		}
		return r
	}
	v := view{known: true, revision: at(ms.revision), memberRevision: ms.revision, applied: ms.applied, readyAt: ms.readyAt,
		applying: ms.applying, removing: ms.removing, drifted: ms.drifted, drift: ms.drift, err: ms.err, failedRev: at(ms.failedRev),
		failedAt: ms.failedAt, attempts: ms.attempts, departedAt: ms.departedAt, settled: ms.settled != "" && ms.settled == ms.revision,
		shares: ms.shares}
	if !ms.ready() {
		v.readyAt = time.Time{}
	}
	sorted := ms.sortedObjects()
	v.feedback = feedbackOf(sorted)
	for _, a := range sorted {
		st, msg := a.status, a.message
		if a.gone {
			st, msg = "NotFound", "deleted on the member"
		}
		r := a.ref
		v.objects = append(v.objects, v1alpha1.ReleaseObjectStatus{Group: r.GVR.Group, Version: r.GVR.Version, Resource: r.GVR.Resource,
			Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Status: st, Message: msg})
		if v.notCurrent == nil && (a.gone || a.status != "Current") {
			cp := *a
			if a.gone {
				cp.status, cp.message = "NotFound", "deleted on the member"
			}
			v.notCurrent = &cp
		}
	}
	return v
}

// gates are a Release's rollout settings, defaulted.
type gates struct {
	soak, deadline, retryAfter time.Duration
	maxFailures                int
	correctDrift, ignoreDrift  bool
	// manual: each wave begins only once approved; approved is how many waves of the
	// revision are (ApprovedAnnotation).
	manual   bool
	approved int
	// grace is how long a member that left for its health keeps the objects once replaced
	// (spec.departureGraceSeconds).
	grace time.Duration
}

// gatesOf are rel's gates for a decision of total members.
func gatesOf(rel *v1alpha1.Release, total int, retryAfter time.Duration) gates {
	g := gates{deadline: 600 * time.Second, retryAfter: retryAfter, maxFailures: MaxFailures(rel.Spec.Rollout, total),
		correctDrift: driftPolicy(rel) == v1alpha1.DriftCorrect, ignoreDrift: driftPolicy(rel) == v1alpha1.DriftIgnore,
		grace: DefaultDepartureGrace}
	if s := rel.Spec.DepartureGraceSeconds; s != nil {
		g.grace = time.Duration(*s) * time.Second
	}
	if r := rel.Spec.Rollout; r != nil {
		g.manual = r.Approval == v1alpha1.ApprovalManual
		g.soak = time.Duration(r.SoakSeconds) * time.Second
		if r.ProgressDeadlineSeconds != nil {
			g.deadline = time.Duration(*r.ProgressDeadlineSeconds) * time.Second
		}
	}
	return g
}

// snapshot is everything one pass decides from.
type snapshot struct {
	now      time.Time
	revision string
	gates    gates
	// waves are the decision's members in rollout order (Waves); views how each stands, by
	// name (a member without a view is one nobody applied to yet).
	waves [][]types.NamespacedName
	views map[types.NamespacedName]view
	// own are the members this replica holds a state of (those it applied to, and those it
	// was handed), as its slices report them.
	own map[types.NamespacedName]view
	// mine are the members this replica applies to (all of them unless sharded).
	mine map[types.NamespacedName]bool
	// leaving are the members this replica has the Release's objects on that the decision no
	// longer names; empty says the decision names no member.
	leaving []types.NamespacedName
	empty   bool
	// health is, for each leaving member, how its Cluster stands (departure.go).
	health map[types.NamespacedName]memberHealth
	// fresh: the members are the registry's as they are now (nothing is removed otherwise).
	fresh bool
	// resync: deliver again now to every member whose wave has begun (rollout restart).
	resync bool
	// stop is the revision's recorded stop, while it holds (stop.go).
	stop *Stop
	// waiting are the members not to apply to yet, and why (a dependency not Ready there);
	// held the leaving members not to remove from yet, and why (a dependent still there).
	waiting, held map[types.NamespacedName]string
}

// judgement is a member's phase as status shows it.
type judgement struct {
	phase           v1alpha1.ReleaseMemberPhase
	reason, message string
}

// plan is what a pass does, and how the rollout stands.
type plan struct {
	apply, remove []types.NamespacedName
	judged        map[types.NamespacedName]judgement
	// waves is how many waves the rollout has; wave how many of them have begun (1-based: the
	// wave the rollout is in), the same number everywhere status shows it.
	waves, wave int
	// failed are the members that failed at the revision, in rollout order; stopped says there
	// are more of them than maxFailures allows, or that the revision's stop is recorded: no
	// further wave begins, and no member that did not run the revision is given it.
	failed   []types.NamespacedName
	stopped  bool
	recorded *Stop
	// finished is how many waves have finished, in order.
	finished int
	// settled are the members of finished waves that are Ready at the revision and not yet
	// recorded as settled at it (recordSettled).
	settled []types.NamespacedName
	// done: every wave has finished (each member Ready at the revision for the soak, or failed).
	done bool
	// awaiting is the wave (1-based) that may begin once approved; 0 when none waits.
	awaiting int
	// held: the decision names no member, and nothing is removed from those that have objects.
	held bool
	// departed are the leaving members that left for their health and keep the objects, and
	// what they wait for (departure.go).
	departed map[types.NamespacedName]departure
	// wait is when the pass should be looked at again though nothing else calls (a soak, a
	// retry, a deadline); zero for never.
	wait time.Duration
}

// decide is the plan for a snapshot: a pure function of it.
func decide(s snapshot) plan {
	p := plan{judged: map[types.NamespacedName]judgement{}, waves: len(s.waves), departed: s.departures()}
	p.failed = s.failures(p.departed)
	p.stopped, p.recorded = len(p.failed) > s.gates.maxFailures || s.stop != nil, s.stop
	open, soakLeft := s.openWave()
	p.done, p.finished = open == len(s.waves), open
	// The wave the rollout is in: the last that has begun (a member of a wave done before may
	// fail later), or the open one when it may begin; the first when none has.
	p.wave = len(s.waves)
	if !p.done {
		p.wave = 1
		if !p.stopped {
			p.wave = open + 1
			if s.gates.manual && open+1 > s.gates.approved && !s.begun(s.waves[open]) {
				p.wave, p.awaiting = max(open, 1), open+1
			}
		}
		for i, w := range s.waves {
			if s.begun(w) {
				p.wave = max(p.wave, i+1)
			}
		}
	}
	p.wait = pick(0, soakLeft)
	p.settled = s.newlySettled(open)
	for i, w := range s.waves {
		for _, k := range w {
			v := s.views[k]
			approved := !s.gates.manual || i < s.gates.approved || s.tried(v)
			starts := approved && i <= open && (!p.stopped || s.tried(v))
			p.judged[k] = s.judge(v, p.stopped && !starts)
			if !starts && i == open && p.awaiting == i+1 {
				p.judged[k] = s.awaitingApproval(v, i+1)
			}
			if i > open || !s.mine[k] || !starts {
				continue
			}
			if why := s.waiting[k]; why != "" && v.revision != s.revision {
				p.judged[k] = judgement{v1alpha1.PhasePending, "DependencyNotReady", why}
				continue // its dependency's change calls
			}
			switch due := s.retryDue(v); {
			case v.applying || v.removing:
			case s.resync:
				p.apply = append(p.apply, k)
			case due > 0:
				p.wait = pick(p.wait, due)
			case due == 0, v.revision != s.revision, v.drifted && s.gates.correctDrift:
				p.apply = append(p.apply, k)
			case v.readyAt.IsZero() && v.err == nil && !s.settledAt(v):
				// Applied, not yet healthy: looked at again at its deadline.
				p.wait = pick(p.wait, v.applied.Add(s.gates.deadline).Sub(s.now))
			}
		}
	}
	p.held = s.empty && len(s.leaving) > 0
	p.wait = pick(p.wait, s.departuresWait(p.departed))
	if !p.held && s.fresh {
		for _, k := range s.leaving {
			if _, kept := p.departed[k]; !kept && s.held[k] == "" { // dependents leave first
				p.remove = append(p.remove, k)
			}
		}
	}
	return p
}

// failures are the members that failed at the revision, in rollout order, then those of
// departed that left for their health in the middle of its rollout (tried at it, not Ready at
// it): each costs the rollout a failure, as an unreachable member in the decision does, so the
// next wave does not begin as if its wave had finished without it.
func (s snapshot) failures(departed map[types.NamespacedName]departure) []types.NamespacedName {
	var out []types.NamespacedName
	for _, w := range s.waves {
		for _, k := range w {
			if s.failedAt(s.views[k]) {
				out = append(out, k)
			}
		}
	}
	for _, k := range s.leaving {
		if _, ok := departed[k]; ok && s.lostMidRollout(s.own[k]) {
			out = append(out, k)
		}
	}
	return out
}

// newlySettled are the members of the waves before open (those done) that are Ready at the
// revision and not recorded as settled at it yet.
func (s snapshot) newlySettled(open int) []types.NamespacedName {
	var out []types.NamespacedName
	for _, w := range s.waves[:open] {
		for _, k := range w {
			if v := s.views[k]; s.readyAt(v) && !v.settled {
				out = append(out, k)
			}
		}
	}
	return out
}

// settledAt: the member finished its wave at the revision (Ready at it for the soak, its wave
// done), whatever its health is now. A progress deadline is for reaching health, as a
// Deployment's progressDeadlineSeconds is: a settled member that loses health later is
// Degraded, and neither costs the rollout a failure nor holds a wave, nor starts a rollback.
func (s snapshot) settledAt(v view) bool {
	return v.known && v.settled && v.revision == s.revision
}

// openWave is the first wave not yet done (len(waves) when all are), and how long its members
// that are Ready have left to soak. A wave is done when each member is Ready at the revision,
// as seen after its apply, for the soak, or failed at the revision and not due to be tried again.
func (s snapshot) openWave() (int, time.Duration) {
	for i, w := range s.waves {
		done, soak := true, time.Duration(0)
		for _, k := range w {
			v := s.views[k]
			switch {
			case s.settledAt(v) && !s.readyAt(v):
				// Finished its wave, and lost its health since: the wave stays done.
			case s.readyAt(v):
				if left := v.readyAt.Add(s.gates.soak).Sub(s.now); left > 0 {
					done, soak = false, max(soak, left) // the wave soaks until its last member has
				}
			case s.failedAt(v) && s.retryDue(v) != 0:
			default:
				done = false
			}
		}
		if !done {
			return i, soak
		}
	}
	return len(s.waves), 0
}

// readyAt: the member runs the revision and every object of it is Current.
func (s snapshot) readyAt(v view) bool {
	return v.known && v.revision == s.revision && v.err == nil && !v.readyAt.IsZero() && !v.applying
}

// lostMidRollout: a member that left the decision was tried at the revision and not Ready at it.
func (s snapshot) lostMidRollout(v view) bool {
	return s.tried(v) && !s.readyAt(v) && !s.settledAt(v)
}

// tried: the member was applied to at the revision, or tried and failed.
func (s snapshot) tried(v view) bool {
	return v.known && (v.revision == s.revision || v.failedRev == s.revision)
}

// begun: some member of the wave was tried at the revision.
func (s snapshot) begun(w []types.NamespacedName) bool {
	for _, k := range w {
		if s.tried(s.views[k]) {
			return true
		}
	}
	return false
}

// failedAt: the member failed at the revision: its apply, an object's health, or its progress
// deadline. An unreachable member counts too: it costs the rollout one failure of maxFailures,
// never a wave that waits for it for good.
func (s snapshot) failedAt(v view) bool {
	switch {
	case !v.known || v.applying || s.settledAt(v):
		return false
	case v.err != nil:
		return v.failedRev == s.revision
	case v.revision != s.revision || !v.readyAt.IsZero():
		return false
	case v.notCurrent != nil && v.notCurrent.status == "Failed":
		return true
	}
	return s.now.Sub(v.applied) > s.gates.deadline
}

// retryDue is, for a member whose apply of the revision failed, how long until it is tried
// again: 0 when it is due now, -1 when it is not such a member. The backoff is short at first
// (1 s, doubling), so that a cause fixed elsewhere (a namespace created) is seen soon, and never
// longer than retryAfter.
func (s snapshot) retryDue(v view) time.Duration {
	if !v.known || v.err == nil || v.failedRev != s.revision {
		return -1
	}
	backoff := s.gates.retryAfter
	if v.attempts > 0 && v.attempts < 16 {
		backoff = min(backoff, time.Second<<(v.attempts-1))
	}
	return max(v.failedAt.Add(backoff).Sub(s.now), 0)
}

// judge is a member's phase: notStarted says its wave will not begin (the rollout stopped).
func (s snapshot) judge(v view, notStarted bool) judgement {
	pending := func() judgement {
		j := judgement{phase: v1alpha1.PhasePending, reason: "WaitingForWave"}
		if notStarted {
			j.reason, j.message = "RolloutStopped", "the rollout stopped before this member's wave"
		}
		if v.memberRevision != "" {
			j.message = safetext.OneLine(fmt.Sprintf("runs revision %s; %s", v.memberRevision, cmp.Or(j.message, "waits for its wave")), 1024)
		}
		return j
	}
	switch {
	case !v.known:
		return pending()
	case v.applying:
		return judgement{phase: v1alpha1.PhaseApplying}
	case v.err != nil && v1alpha1.Unreachable(v.err.class):
		return judgement{v1alpha1.PhaseUnreachable, v.err.class, safetext.OneLine(v.err.Error(), 1024)}
	case s.settledAt(v) && !s.readyAt(v) && !(v.err == nil && v.drifted && !s.gates.ignoreDrift):
		return s.degraded(v)
	case v.err != nil && v.failedRev == s.revision:
		return judgement{v1alpha1.PhaseFailed, v.err.class, safetext.OneLine(v.err.Error(), 1024)}
	case v.revision != s.revision:
		return pending()
	case v.drifted && !s.gates.ignoreDrift:
		msg := cmp.Or(v.drift, "an object was changed on the member by someone else")
		if s.gates.correctDrift {
			msg += "; correcting"
		}
		return judgement{v1alpha1.PhaseDrifted, "Drifted", safetext.OneLine(msg, 1024)}
	case s.readyAt(v):
		return judgement{phase: v1alpha1.PhaseReady}
	case v.notCurrent != nil && v.notCurrent.status == "Failed":
		return judgement{v1alpha1.PhaseFailed, "ObjectFailed", safetext.OneLine(v.notCurrent.ref.String()+": "+v.notCurrent.message, 1024)}
	case s.now.Sub(v.applied) > s.gates.deadline:
		msg := fmt.Sprintf("not healthy within %s of its apply", s.gates.deadline)
		if v.notCurrent != nil {
			msg += ": " + v.notCurrent.ref.String() + ": " + v.notCurrent.message
		}
		return judgement{v1alpha1.PhaseFailed, v1alpha1.FailureTimeout, safetext.OneLine(msg, 1024)}
	}
	j := judgement{phase: v1alpha1.PhaseProgressing, reason: "WaitingForHealth"}
	if v.notCurrent != nil {
		j.message = safetext.OneLine(v.notCurrent.ref.String()+" is "+v.notCurrent.status+": "+v.notCurrent.message, 1024)
	}
	return j
}

// degraded is the judgement of a member that finished its wave at the revision and is not Ready
// now: an object lost its health (a Node died under its Pods), or correcting it failed.
func (s snapshot) degraded(v view) judgement {
	if v.err != nil {
		return judgement{v1alpha1.PhaseDegraded, v.err.class, safetext.OneLine("was Ready at this revision; applying it again failed: "+v.err.Error(), 1024)}
	}
	msg, reason := "was Ready at this revision, and lost its health since", "HealthLost"
	if v.notCurrent != nil {
		msg += ": " + v.notCurrent.ref.String() + " is " + v.notCurrent.status
		if v.notCurrent.message != "" {
			msg += ": " + v.notCurrent.message
		}
		if v.notCurrent.status == "Failed" {
			reason = "ObjectFailed" // an object says it failed, as its health rules judge it
		}
	}
	return judgement{v1alpha1.PhaseDegraded, reason, safetext.OneLine(msg+"; it counts as Ready again once healthy, and stops nothing", 1024)}
}

// awaitingApproval is the judgement of a member whose wave waits for approval.
func (s snapshot) awaitingApproval(v view, wave int) judgement {
	msg := fmt.Sprintf("wave %d awaits approval (clusterregistry rollout approve)", wave)
	if v.memberRevision != "" {
		msg += "; runs revision " + v.memberRevision
	}
	return judgement{v1alpha1.PhasePending, "AwaitingApproval", msg}
}

// Approved is how many waves of revision the Release's ApprovedAnnotation approves.
func Approved(rel *v1alpha1.Release, revision string) int {
	rev, wave, ok := strings.Cut(rel.Annotations[v1alpha1.ApprovedAnnotation], "/")
	n, err := strconv.Atoi(wave)
	if !ok || rev != revision || err != nil || n < 0 {
		return 0
	}
	return n
}
