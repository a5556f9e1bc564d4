package health

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// A sweep writes a status for every member left unprobed, one write at a time. It used to run on
// the dispatcher, which then handed out no probe until the writes were done: at 10,000 members
// whose first pass outlasted UnknownAfter, probing stopped for good while the sweeps wrote. Here
// the registry holds the sweep's write, and a due member must still be probed meanwhile.
func TestSweepDoesNotHoldUpProbes(t *testing.T) {
	held := holdWrites(t)
	c := fakeController(t, held.patch, Options{Interval: 50 * time.Millisecond, UnknownAfter: 100 * time.Millisecond})

	member := func(name string) *multicluster.Member {
		return multicluster.NewMember(&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}, multicluster.Clients{})
	}
	stale := &tracked{member: member("stale"), added: time.Now().Add(-time.Hour)}
	due := &tracked{member: member("due"), added: time.Now()}
	c.mu.Lock()
	c.members[stale.member.Name()] = stale
	c.members[due.member.Name()] = due
	c.schedule(due, time.Now().Add(300*time.Millisecond)) // after the first sweeps
	c.mu.Unlock()

	stop := working(c, held)
	defer func() { stop(); c.sweeps.Wait() }()
	held.firstWrite(t) // the sweep's, for the member unprobed for an hour
	probed := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !due.probing.IsZero() || !due.state.lastProbe.IsZero()
	}
	require.Eventually(t, probed, 10*time.Second, 10*time.Millisecond, "no member was probed while the sweep's write was outstanding")
}

// A member rescheduled earlier (its reach changed) is probed at the new time, once: the queue
// keeps one time per key, the sooner, so no key of the old time comes out after. A key that
// comes out before its member's time (the member removed and added again, later) is not
// probed, and goes back until then.
func TestRescheduledMemberIsProbedOnce(t *testing.T) {
	c := &Controller{members: map[types.NamespacedName]*tracked{}}
	q := probeQueue(t, c)
	m := multicluster.NewMember(&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "a"}}, multicluster.Clients{})
	tr := &tracked{member: m}
	c.mu.Lock()
	c.members[m.Name()] = tr
	c.schedule(tr, time.Now().Add(100*time.Millisecond))
	c.schedule(tr, time.Now()) // earlier: the first key is still queued
	c.mu.Unlock()

	key := q.get()
	require.Equal(t, m.Name(), key)
	require.NotNil(t, c.due(key))
	c.mu.Lock()
	c.schedule(tr, time.Now().Add(time.Hour)) // as a probe does: the next one, an interval on
	c.mu.Unlock()
	q.done(key)
	require.Never(t, func() bool { return q.wq.Len() > 0 }, 500*time.Millisecond, 20*time.Millisecond,
		"a key came out at a time the member was no longer scheduled for")

	// Removed with its key queued for 50 ms, added again for an hour on: the key comes out
	// early, is not probed, and goes back for the hour.
	c.mu.Lock()
	c.members[m.Name()] = &tracked{member: m, next: time.Now().Add(time.Hour)}
	c.mu.Unlock()
	c.probes.AddAfter(m.Name(), 50*time.Millisecond)
	key = q.get()
	res, err := c.reconcileProbe(t.Context(), reconcile.Request{NamespacedName: key})
	q.done(key)
	require.NoError(t, err)
	require.InDelta(t, time.Hour.Seconds(), res.RequeueAfter.Seconds(), 5, "a key out before its member's time was not put back until then")
}

// A probe in flight counts as probed. A member that does not answer, probed with a timeout of
// several intervals, is being probed all the time; it used to be marked NotProbed between its
// Unreachable verdicts, so that its status flapped between the two, an Event each time.
func TestProbeInFlightCountsAsProbed(t *testing.T) {
	c := &Controller{opts: Options{UnknownAfter: time.Second}}
	now := time.Now()
	tr := &tracked{added: now.Add(-time.Hour)}
	tr.state.lastProbe = now.Add(-10 * time.Second) // the last probe to finish began long ago
	require.True(t, c.stale(tr, now))
	tr.probing = now.Add(-500 * time.Millisecond)
	require.False(t, c.stale(tr, now), "a member whose probe is in flight is marked NotProbed")
	tr.probing = now.Add(-2 * time.Second) // in flight for longer than UnknownAfter: stuck
	require.True(t, c.stale(tr, now))
}
