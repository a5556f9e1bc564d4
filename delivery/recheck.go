package delivery

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// A Release learns of its objects on members from the members' watches, and a Ready Release has
// no other reason to be looked at. A watch can miss what happened while it was away (a copy put
// back while it reconnected, an event dropped): so every Recheck the Controller compares each
// object it applied with the member's watch cache, as if the cache's copy had just been seen,
// and what the watch missed is corrected (or reported) within Recheck, not never. It reads only
// the caches: no request to any member.

// DefaultRecheck is ControllerOptions.Recheck's default.
const DefaultRecheck = 5 * time.Minute

// recheckMargin is how long after an apply an object missing from the member's cache is taken
// as deleted (or Recheck, if shorter): the cache may not have seen the apply's creation yet.
const recheckMargin = 30 * time.Second

// cached is one applied object of a Release on a member, as the member's watch cache holds it.
type cached struct {
	member types.NamespacedName
	r      ref
	obj    *unstructured.Unstructured
	found  bool
	// young: applied too recently for its absence from the cache to mean anything.
	young bool
}

// recheck compares rel key's applied objects with the watch caches when Recheck has passed since
// it last did, and reports whether anything it judged changed.
func (c *Controller) recheck(key types.NamespacedName, st *releaseState, now time.Time) bool {
	var want []cached
	c.mu.Lock()
	if now.Sub(st.checked) < c.opts.Recheck {
		c.mu.Unlock()
		return false
	}
	st.checked = now
	margin := min(recheckMargin, c.opts.Recheck)
	for member, ms := range st.members {
		if ms.applying || ms.removing {
			continue
		}
		for r, a := range ms.objects {
			if !a.gone {
				want = append(want, cached{member: member, r: r, young: now.Sub(ms.applied) < margin})
			}
		}
	}
	c.mu.Unlock()
	// The caches are read without c.mu: their event handlers take it.
	read := want[:0]
	for _, w := range want {
		kind := c.kind(w.r.GVR)
		if kind == nil {
			continue
		}
		if s, ok := kind.Status(w.member); !ok || !s.Fresh() {
			continue // a cache that is not following its member says nothing of what is there
		}
		obj, found, err := kind.Get(w.member, w.r.Namespace, w.r.Name)
		if err == nil && (found || !w.young) {
			w.obj, w.found = obj, found
			read = append(read, w)
		}
	}
	return c.observeCached(key, st, read)
}

// observeCached judges each cached copy as observe judges a watch's event; one missing from its
// cache as deleted.
func (c *Controller) observeCached(key types.NamespacedName, st *releaseState, read []cached) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for _, w := range read {
		ms := st.members[w.member]
		if ms == nil || ms.applying {
			continue // applied again meanwhile: the apply's answers are newer
		}
		a := ms.objects[w.r]
		if a == nil {
			continue
		}
		obj := w.obj
		if !w.found {
			obj = &unstructured.Unstructured{}
			obj.SetUID(a.uid)
		}
		if c.observe(key, ms, a, !w.found, obj) {
			changed = true
		}
	}
	return changed
}
