package reconcilequeue

import (
	"context"
	"sync"

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
	pending []types.NamespacedName
	started []func(ctx context.Context)
}

// Add has key reconciled: now, or once the controller has started.
func (q *Queue) Add(key types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queue == nil {
		q.pending = append(q.pending, key)
		return
	}
	q.queue.Add(reconcile.Request{NamespacedName: key})
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
		for _, key := range q.pending {
			wq.Add(reconcile.Request{NamespacedName: key})
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
