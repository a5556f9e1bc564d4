package subscribe

import "sync"

// Queue is one subscriber: the events sent to it and not yet delivered to its fn.
type Queue[T any] struct {
	fn func(T)

	mu       sync.Mutex
	queue    []T
	draining bool
	stopped  bool
}

// NewQueue is a subscriber that calls fn with each event sent to it.
func NewQueue[T any](fn func(T)) *Queue[T] { return &Queue[T]{fn: fn} }

// Send queues ev, starting the goroutine that delivers it if none runs.
func (q *Queue[T]) Send(ev T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return
	}
	q.queue = append(q.queue, ev)
	if !q.draining {
		q.draining = true
		go q.drain()
	}
}

func (q *Queue[T]) drain() {
	var zero T
	for {
		q.mu.Lock()
		if q.stopped || len(q.queue) == 0 {
			q.draining = false
			q.queue = nil
			q.mu.Unlock()
			return
		}
		ev := q.queue[0]
		q.queue[0] = zero // what was delivered is not kept alive by the queue
		q.queue = q.queue[1:]
		q.mu.Unlock()
		q.fn(ev)
	}
}

// Stop drops what waits: no call starts after Stop returns, though one under way may finish.
func (q *Queue[T]) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	q.queue = nil
}

// List is a source's subscribers. It is not safe for concurrent use: the source holds its own lock
// around Add, Remove and Send, the same lock that guards what its events describe, so that a new
// subscriber's first events and the later ones agree.
type List[T any] struct {
	queues []*Queue[T]
}

// Add subscribes fn, first sending it initial, and returns its Queue, for Remove.
func (l *List[T]) Add(fn func(T), initial ...T) *Queue[T] {
	q := NewQueue(fn)
	for _, ev := range initial {
		q.Send(ev)
	}
	l.queues = append(l.queues, q)
	return q
}

// Remove ends q's subscription; the caller calls q.Stop once it no longer holds its lock.
func (l *List[T]) Remove(q *Queue[T]) {
	for i, other := range l.queues {
		if other == q {
			l.queues = append(l.queues[:i:i], l.queues[i+1:]...)
			return
		}
	}
}

// Send queues ev for every subscriber.
func (l *List[T]) Send(ev T) {
	for _, q := range l.queues {
		q.Send(ev)
	}
}
