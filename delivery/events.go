package delivery

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Event reasons on Releases: what an operator watches a rollout for. Each is said once, when it
// happens, never at steady state (the recorder's correlator rate-limits a flapping one too).
const (
	EventRolloutStarted  = "RolloutStarted"
	EventWaveStarted     = "WaveStarted"
	EventMemberFailed    = "MemberFailed"
	EventRolloutStopped  = "RolloutStopped"
	EventRolloutComplete = "RolloutComplete"
	EventDrift           = "Drift"
	EventRolledBack      = "RolledBack"
)

// told is what a Release's events last said, so that only a change is told.
type told struct {
	revision string
	wave     int
	stopped  bool
	complete bool
	// completed: the revision's RolloutComplete was told, whatever it is now (a member that
	// lost its health after its wave, back healthy, completes nothing again).
	completed bool
	failed    map[types.NamespacedName]bool
	drifted   map[types.NamespacedName]string
}

// toldOf is what a plan says, in the terms of the events.
func toldOf(s snapshot, p plan) told {
	t := told{revision: s.revision, wave: p.wave, stopped: p.stopped, failed: map[types.NamespacedName]bool{}, drifted: map[types.NamespacedName]string{}}
	t.complete = len(p.judged) > 0 && p.done && !p.stopped
	for _, k := range p.failed {
		t.failed[k] = true
	}
	for k, j := range p.judged {
		t.complete = t.complete && j.phase == v1alpha1.PhaseReady
		if j.phase == v1alpha1.PhaseDrifted {
			t.drifted[k] = j.message
		}
	}
	return t
}

// event is one event to record.
type event struct {
	kind, reason, message string
}

// news are the events between what was told and what a plan says now. The first plan a
// Controller makes of a Release is told nothing of (a restart is not news).
func news(before *told, now told, p plan) []event {
	if before == nil {
		return nil
	}
	var out []event
	if now.revision != before.revision {
		out = append(out, event{corev1.EventTypeNormal, EventRolloutStarted, fmt.Sprintf("revision %s: %d members in %d waves", now.revision, len(p.judged), p.waves)})
	}
	if now.wave > 1 && (now.wave > before.wave || now.revision != before.revision) {
		out = append(out, event{corev1.EventTypeNormal, EventWaveStarted, fmt.Sprintf("wave %d of %d of revision %s", now.wave, p.waves, now.revision)})
	}
	for _, k := range sortedKeys(now.failed) {
		if !before.failed[k] || now.revision != before.revision {
			out = append(out, event{corev1.EventTypeWarning, EventMemberFailed, fmt.Sprintf("%s: %s", k.Name, p.judged[k].message)})
		}
	}
	if now.stopped && (!before.stopped || now.revision != before.revision) {
		out = append(out, event{corev1.EventTypeWarning, EventRolloutStopped, fmt.Sprintf("%d members failed (%s): the rollout stopped in wave %d of %d", len(p.failed), namesOf(p.failed, 5), p.wave, p.waves)})
	}
	for _, k := range sortedKeys(now.drifted) {
		if before.drifted[k] != now.drifted[k] {
			out = append(out, event{corev1.EventTypeWarning, EventDrift, fmt.Sprintf("%s: %s", k.Name, now.drifted[k])})
		}
	}
	if now.complete && (now.revision != before.revision || !(before.complete || before.completed)) {
		out = append(out, event{corev1.EventTypeNormal, EventRolloutComplete, fmt.Sprintf("every member (%d) runs revision %s, healthy", len(p.judged), now.revision)})
	}
	return out
}

// recordEvents starts recording the Controller's events on Releases, until the returned func
// stops it.
func (c *Controller) recordEvents(ctx context.Context) (stop func(), err error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	var rec record.EventRecorder = b.NewRecorder(scheme, corev1.EventSource{Component: c.opts.FieldManager})
	c.recorder.Store(&rec)
	return b.Shutdown, nil
}

// tell records what changed since a Release's events last spoke, as the plan says now.
func (c *Controller) tell(rel *v1alpha1.Release, st *releaseState, s snapshot, p plan) {
	now := toldOf(s, p)
	c.mu.Lock()
	before := st.told
	now.completed = now.complete || before != nil && before.revision == now.revision && (before.complete || before.completed)
	st.told = &now
	c.mu.Unlock()
	rec := c.recorder.Load()
	if rec == nil {
		return
	}
	for _, e := range news(before, now, p) {
		(*rec).Event(rel, e.kind, e.reason, e.message)
	}
}
