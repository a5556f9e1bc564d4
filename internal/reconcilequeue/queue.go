package reconcilequeue

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Queue is a controller's queue as its own code adds to it. The zero Queue is ready; give
// Source to the controller's Watch before it starts.
type Queue struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	pending []pendingKey
	started []func(ctx context.Context)
}

// pendingKey is a key added before the controller started: due at at, or now when at is zero.
type pendingKey struct {
	key types.NamespacedName
	at  time.Time
}

// Add has key reconciled: now, or once the controller has started.
func (q *Queue) Add(key types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queue == nil {
		q.pending = append(q.pending, pendingKey{key: key})
		return
	}
	q.queue.Add(reconcile.Request{NamespacedName: key})
}

// AddAfter has key reconciled once d has passed (counted from now, whether or not the
// controller has started); a key already waiting keeps the sooner of the two times, as
// client-go's delaying queue and controller-runtime's priority queue keep it.
func (q *Queue) AddAfter(key types.NamespacedName, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queue == nil {
		q.pending = append(q.pending, pendingKey{key: key, at: time.Now().Add(d)})
		return
	}
	q.queue.AddAfter(reconcile.Request{NamespacedName: key}, d)
}

// Len is how many keys are ready and not being reconciled: those added before the controller
// started, until it does.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queue == nil {
		return len(q.pending)
	}
	return q.queue.Len()
}

// OnStart runs f when the controller starts, after the keys added before are queued, with the
// controller's context: where a controller subscribes to events that add keys.
func (q *Queue) OnStart(f func(ctx context.Context)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.started = append(q.started, f)
}

// Source is the controller's source of the keys Add is given.
func (q *Queue) Source() source.TypedSource[reconcile.Request] {
	return source.TypedFunc[reconcile.Request](func(ctx context.Context, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.mu.Lock()
		q.queue = wq
		for _, p := range q.pending {
			if p.at.IsZero() {
				wq.Add(reconcile.Request{NamespacedName: p.key})
			} else {
				wq.AddAfter(reconcile.Request{NamespacedName: p.key}, time.Until(p.at))
			}
		}
		q.pending = nil
		started := q.started
		q.mu.Unlock()
		for _, f := range started {
			f(ctx)
		}
		return nil
	})
}
