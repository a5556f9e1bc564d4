package main

import (
	"sync"
	"time"
)

// churn notices a controller fighting another writer: an object this controller rewrites again
// and again is one that somebody else keeps changing back (another controller, a second registry
// entry for the same member, a person with kubectl). Writing on would only feed the fight, so
// once an object has been rewritten more than limit times within window, churn holds its writes
// for hold and says so once; the caller logs that and waits.
type churn struct {
	limit  int
	window time.Duration
	hold   time.Duration
	now    func() time.Time

	mu      sync.Mutex
	writes  map[string][]time.Time // per object, the times of its recent rewrites
	heldTil map[string]time.Time
}

func newChurn(limit int, window, hold time.Duration) *churn {
	return &churn{limit: limit, window: window, hold: hold, now: time.Now,
		writes: map[string][]time.Time{}, heldTil: map[string]time.Time{}}
}

// held says whether writes to key are on hold, and until when.
func (c *churn) held(key string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.heldTil[key]
	if ok && !c.now().Before(until) {
		delete(c.heldTil, key)
		delete(c.writes, key)
		return time.Time{}, false
	}
	return until, ok
}

// wrote records a rewrite of key, one that changed the object; it returns how many rewrites the
// window holds, and true when that is over the limit, so that key is now on hold.
func (c *churn) wrote(key string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	recent := c.writes[key]
	for len(recent) > 0 && now.Sub(recent[0]) > c.window {
		recent = recent[1:]
	}
	recent = append(recent, now)
	c.writes[key] = recent
	if len(recent) <= c.limit {
		return len(recent), false
	}
	c.heldTil[key] = now.Add(c.hold)
	return len(recent), true
}

// forget drops what is known of key, for an object whose member left.
func (c *churn) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.writes, key)
	delete(c.heldTil, key)
}
