package delivery

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// releaseState is what the Controller knows of one Release's delivery.
type releaseState struct {
	loaded  bool // the inventory was read from this replica's status slices
	members map[types.NamespacedName]*memberState
	// foreign are the members other replicas report (sharded), for the waves; taken are the
	// slice versions members were taken from (see share).
	foreign map[types.NamespacedName]*memberState
	taken   map[types.NamespacedName]string
	// told is what the Release's events last said (events.go); nil before its first pass.
	told *told
	// restarted is the Release's RestartedAtAnnotation as last acted on; nil before its first
	// pass, which takes it as it is (a restart of the Controller is no request).
	restarted *string
	// checked is when the applied objects were last compared with the watch caches (recheck.go).
	checked time.Time
	// rules are its compiled spec.health and spec.feedback (healthcheck.go).
	rules objectRules
	// plans are the Capacity divisions this Controller divided, by name, until the Release's
	// status.divisions has them (divide_capacity.go).
	plans map[string]v1alpha1.ReleaseDivisionStatus
	// readySig is the revision and the members the Release was last Ready on, as its dependents
	// were told (dependencies.go).
	readySig string
}

// memberState is one Release on one member.
type memberState struct {
	revision  string // applied
	applied   time.Time
	shares    []v1alpha1.ReleaseMemberShare // of spec.divide, as revision applied them
	objects   map[ref]*applied
	failedRev string // the revision whose apply failed, and why
	err       *memberError
	failedAt  time.Time
	attempts  int // applies failed in a row: the retry's backoff grows with them
	drifted   bool
	drift     string // what drifted: the object, and how
	applying  bool
	// during are the watch's events that came while applying: replayed over the apply's answers
	// once it is done, so that an edit or a delete made meanwhile is not lost.
	during  []watched
	readyAt time.Time // when every object was first seen Current at revision (settle keeps it)
	// settled is the revision at which the member finished its wave: Ready at it for the soak,
	// its wave done (recordSettled). Its progress deadline is behind it: at that revision, a
	// later loss of health is Degraded, never a failure of the rollout.
	settled string
	// source and judgedAt are, for a member another replica reports (sharding.go), the report's
	// slice version it was read from and the revision it was judged at.
	source, judgedAt string
	removing         bool
	// departedAt is when the member left the decision because of its health (departure.go);
	// zero while it is in the decision, or left deliberately.
	departedAt time.Time
	// reported is the revision, and when it was applied, that this member's status said before
	// this Controller started (loadInventory): what a Helm-mode apply that finds the release
	// unchanged keeps, so that a restart rewrites no status.
	reported struct {
		revision string
		applied  time.Time
	}
}

// ready: every object of the member's revision is Current, as settle last saw it.
func (ms *memberState) ready() bool {
	return !ms.readyAt.IsZero() && ms.allCurrent()
}

func (ms *memberState) allCurrent() bool {
	if ms.err != nil || len(ms.objects) == 0 {
		return false
	}
	for _, a := range ms.objects {
		if a.gone || a.status != "Current" {
			return false
		}
	}
	return true
}

// settle records, with c.mu held, when the member became ready: called wherever its objects'
// health or its error changes, so that readyAt is the first moment every object was seen
// Current after the apply (the soak counts from it), and zero while any is not.
func (ms *memberState) settle(now time.Time) {
	switch {
	case !ms.allCurrent():
		ms.readyAt = time.Time{}
	case ms.readyAt.IsZero():
		ms.readyAt = now
	}
}

// recordSettled keeps, with c.mu held, that each member of p.settled finished its wave at the
// revision it runs, so that a later loss of its health is judged Degraded, not a failure.
func recordSettled(st *releaseState, p plan) {
	for _, k := range p.settled {
		if ms := st.members[k]; ms != nil {
			ms.settled = ms.revision
		}
	}
}

// fail records, with c.mu held, that applying revision failed.
func (ms *memberState) fail(revision string, err *memberError, now time.Time) {
	ms.applying, ms.during = false, nil
	ms.failedRev, ms.err, ms.failedAt = revision, err, now
	ms.attempts++
	ms.settle(now)
}

// sortedObjects are the member's objects by name.
func (ms *memberState) sortedObjects() []*applied {
	out := make([]*applied, 0, len(ms.objects))
	for _, a := range ms.objects {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *applied) int { return cmp.Compare(a.ref.String(), b.ref.String()) })
	return out
}
