package fleetcache

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/multicluster"
)

// EventType is what happened to an object in a member's cache.
type EventType int

const (
	// Added: the object appeared in the cache, from the member's initial list or later.
	Added EventType = iota + 1
	// Updated: the object changed. A relist (after a watch broke, say) that finds an object at
	// the resourceVersion already cached tells nothing: the object did not change.
	Updated
	// Deleted: the object is gone; Object is its last known state.
	Deleted
)

func (t EventType) String() string {
	switch t {
	case Added:
		return "Added"
	case Updated:
		return "Updated"
	case Deleted:
		return "Deleted"
	}
	return "Unknown"
}

// Event is a change to one object in one member's cache: the fleet's merged event stream names
// the member of every event.
type Event[T runtime.Object] struct {
	Type   EventType
	Member *multicluster.Member
	Object T
	// Old is the object before an update; the zero T otherwise.
	Old T
}

// AddEventHandler calls fn for every change to the kind's objects on every member, current and
// future, starting with an Added event for each object already cached. Calls for one member come
// one at a time and in order; calls for different members may come at once, so fn must be safe
// for concurrent use. fn is called as each change is stored: a slow fn delays its own member's
// events and cache, no other member's (hand slow work to a queue). fn must not call
// AddEventHandler of the same Kind. There is no way to remove a handler other than stopping the
// Cache.
func (k *Kind[T]) AddEventHandler(fn func(Event[T])) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.handlers = append(k.handlers, fn)
	for _, mc := range k.c.memberList() {
		st := mc.informer(k.id)
		if st == nil {
			continue
		}
		if inf, _ := st.get(); inf != nil {
			// In a goroutine of the member's: telling fn of what is cached may wait for the
			// caller (Events' channel is read only once Events returns).
			h := handlerFor(mc, fn)
			mc.done.Go(func() { _, _ = inf.AddEventHandler(h) }) // fails only once stopped
		}
	}
	return nil
}

// Events is the merged event stream as a channel, for tools that would rather range over it:
// it is closed when ctx ends. The channel is buffered (size buffer); when it is full, members'
// events wait, each member's own and no other's.
func (k *Kind[T]) Events(ctx context.Context, buffer int) (<-chan Event[T], error) {
	ch := make(chan Event[T], buffer)
	var closed bool
	var mu sync.RWMutex // handlers send under the read lock; closing takes the write lock
	err := k.AddEventHandler(func(ev Event[T]) {
		mu.RLock()
		defer mu.RUnlock()
		if closed {
			return
		}
		select {
		case ch <- ev:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		mu.Lock()
		closed = true
		close(ch)
		mu.Unlock()
	}()
	return ch, nil
}

// sameVersion reports whether old and obj are the same version of one object: what a relist
// finds of an object that did not change. The caches keep no resync period, so this is the only
// way an informer tells an update of an unchanged object.
func sameVersion(old, obj runtime.Object) bool {
	a, err1 := meta.Accessor(old)
	b, err2 := meta.Accessor(obj)
	return err1 == nil && err2 == nil && a.GetResourceVersion() != "" && a.GetResourceVersion() == b.GetResourceVersion()
}

// handlerFor adapts fn to a member's informer.
func handlerFor[T runtime.Object](mc *memberCaches, fn func(Event[T])) cache.ResourceEventHandler {
	m := mc.member
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				fn(Event[T]{Type: Added, Member: m, Object: o})
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok := obj.(T)
			prev, ok2 := old.(T)
			if ok && ok2 && !sameVersion(prev, o) {
				fn(Event[T]{Type: Updated, Member: m, Object: o, Old: prev})
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(T); ok {
				fn(Event[T]{Type: Deleted, Member: m, Object: o})
			}
		},
	}
}
