package health

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// A probe time moves to the first tick at or after it, never before it and never a whole tick
// later; an interval too short to divide leaves it as it is.
func TestOnTick(t *testing.T) {
	const interval = 10 * time.Second
	tick := interval / ticksPerInterval
	base := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	for _, offset := range []time.Duration{0, time.Nanosecond, tick / 2, tick - time.Nanosecond, tick, 7*tick + 3*time.Millisecond} {
		at := base.Add(offset)
		got := onTick(at, interval)
		require.False(t, got.Before(at), "%v: %v is before it", offset, got)
		require.Less(t, got.Sub(at), tick, "%v: %v is a tick or more after it", offset, got)
		require.True(t, got.Equal(got.Truncate(tick)), "%v: %v is not on a tick", offset, got)
	}
	require.Equal(t, base.Add(time.Nanosecond), onTick(base.Add(time.Nanosecond), ticksPerInterval-1))

	// A due time keeps the monotonic clock reading of the time it came from, so that it is
	// compared with time.Now() by that clock, not the wall clock, which can be stepped back.
	require.Contains(t, onTick(time.Now(), interval).String(), " m=", "the tick lost its monotonic reading")
}

// Members whose probes fall due within one tick come out of the queue together, at that tick,
// and none before it: the process wakes once for them.
func TestProbesDueWithinATickAreReleasedTogether(t *testing.T) {
	// A tick of 500ms: unrounded, the five would come out over 333ms, so a bound of half a tick
	// on how far apart they come out tells the two apart with room for a busy machine.
	const interval = 25 * time.Second
	tick := interval / ticksPerInterval
	c := &Controller{opts: Options{Interval: interval}, members: map[types.NamespacedName]*tracked{}}
	q := probeQueue(t, c)

	// Five members due at points spread over the tick after the next one.
	start := onTick(time.Now().Add(tick), interval)
	var due []*tracked
	c.mu.Lock()
	for i := range 5 {
		m := multicluster.NewMember(&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: string(rune('a' + i))}}, multicluster.Clients{})
		tr := &tracked{member: m}
		c.members[m.Name()] = tr
		c.scheduleOnTick(tr, start.Add(time.Duration(i+1)*tick/6))
		due = append(due, tr)
	}
	c.mu.Unlock()
	for _, tr := range due {
		require.True(t, start.Add(tick).Equal(tr.next), "%s is due at %v, not at the tick after its time", tr.member.Name(), tr.next)
	}

	var out []time.Time
	for range due {
		key := q.get()
		out = append(out, time.Now())
		require.NotNil(t, c.due(key), "%s came out before it was due", key)
		q.done(key)
	}
	require.False(t, out[0].Before(start.Add(tick)), "the first came out before its tick")
	require.Less(t, out[len(out)-1].Sub(out[0]), tick/2, "the tick's members came out at different times: %v", out)
}
