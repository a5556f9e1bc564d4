package health

import "time"

// ticksPerInterval is how many probe times an Interval holds. A member's probe is due at the
// first tick after the time its interval (jittered by a tenth) gives, so that the probes due
// within one tick, a fiftieth of the interval (200 ms by default), are released together: a
// process wakes once for each tick's probes, not once for each probe. A replica that probes a
// third of 10,000 members spent twice the CPU per probe of one that probed all of them, on
// waking alone (BenchmarkShardedHealth's part-alone control, 1,286 probes/s/core against 2,847;
// 2,853 against 3,108 with ticks). A tick is far inside the jitter (a tenth of the interval either
// way), so members probed together still move apart, over ten ticks. Ticks count from the zero
// time, so a shard group's replicas share them too; the registry sees their bursts together.
const ticksPerInterval = 50

// onTick is the first tick of interval at or after t (ticks counted from the zero time, so that
// every member's fall on the same ones); t itself when interval is too short to divide. It keeps
// t's monotonic clock reading: Truncate drops it, and a due time without one is compared with
// the wall clock, so that a clock stepped back would find a member's probe not yet due when its
// key came out of the queue, and drop it.
func onTick(t time.Time, interval time.Duration) time.Time {
	tick := interval / ticksPerInterval
	if tick <= 0 {
		return t
	}
	late := t.Sub(t.Truncate(tick))
	if late == 0 {
		return t
	}
	return t.Add(tick - late)
}

// scheduleOnTick makes t's next probe due at the first tick at or after at; c.mu is held.
func (c *Controller) scheduleOnTick(t *tracked, at time.Time) {
	c.schedule(t, onTick(at, c.opts.Interval))
}
