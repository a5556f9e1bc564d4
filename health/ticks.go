package health

import "time"

// ticksPerInterval is how many probe times an Interval holds. A member's probe is due at the
// first tick after the time its interval (jittered by a tenth) gives, so that the probes due
// within one tick, a fiftieth of the interval (200 ms by default), are released together: a
// process wakes once for each tick's probes, not once for each probe. A replica that probes a
// third of 10,000 members spent twice the CPU per probe of one that probed all of them, on
// waking alone (BenchmarkShardedHealth's part-alone control, 1,286 probes/s/core against 2,847;
// 2,853 against 3,108 with ticks). A tick is far inside the jitter (a fifth of the interval), so
// members still spread over twenty ticks where they would bunch.
const ticksPerInterval = 50

// onTick is the first tick of interval at or after t (ticks counted from the zero time, so that
// every member's fall on the same ones); t itself when interval is too short to divide.
func onTick(t time.Time, interval time.Duration) time.Time {
	tick := interval / ticksPerInterval
	if tick <= 0 {
		return t
	}
	down := t.Truncate(tick)
	if down.Equal(t) {
		return down
	}
	return down.Add(tick)
}

// scheduleOnTick makes t's next probe due at the first tick at or after at; c.mu is held.
func (c *Controller) scheduleOnTick(t *tracked, at time.Time) {
	c.schedule(t, onTick(at, c.opts.Interval))
}
