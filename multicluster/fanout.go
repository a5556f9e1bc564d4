package multicluster

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// ForEach runs fn for every member, as Map does, for work that returns no value.
func ForEach(ctx context.Context, members []*Member, fn func(context.Context, *Member) error, opts ...Option) Results[struct{}] {
	return Map(ctx, members, func(ctx context.Context, m *Member) (struct{}, error) {
		return struct{}{}, fn(ctx, m)
	}, opts...)
}

// Map runs fn for every member, concurrently, and returns one Result per member in the members'
// order. A slow or dead member delays no other beyond its own Timeout; a panic in fn becomes that
// member's error. When ctx ends, no new member starts, those running see their contexts cancelled,
// and Map returns what finished, the rest marked ErrNotStarted.
//
// Map returns once every member has a result, which at a Timeout may be before its callback has
// returned: a callback that ignores its context keeps running, abandoned, and its value is
// dropped. Give TrackCallbacks to wait for such stragglers.
func Map[T any](ctx context.Context, members []*Member, fn func(context.Context, *Member) (T, error), opts ...Option) Results[T] {
	results := make(Results[T], len(members))
	for i, m := range members {
		results[i].Member = m
	}
	f, err := newFanOut(opts)
	r := &run[T]{f: f, fn: fn, results: results}
	if err != nil {
		for i := range results {
			r.finish(i, fmt.Errorf("%w: %w", ErrNotStarted, err))
		}
		return results
	}
	if f.Timeout > 0 {
		r.memberCause = &deadline{"member timed out"}
	}
	if f.OverallTimeout > 0 {
		r.overallCause = &deadline{fmt.Sprintf("fan-out timed out after %s", f.OverallTimeout)}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, f.OverallTimeout, r.overallCause)
		defer cancel()
	}

	// Readiness is read once, up front, so that the canaries are members that will run.
	torun := make([]int, 0, len(members))
	for i, m := range members {
		if f.SkipNotReady && m.Cluster().IsNotReady() {
			r.finish(i, ErrNotReady)
			continue
		}
		torun = append(torun, i)
	}
	if f.Canary > 0 && f.Canary < len(torun) {
		r.start(ctx, torun[:f.Canary])
		if failed := r.failures.Load(); failed > 0 {
			for _, i := range torun[f.Canary:] {
				r.finish(i, fmt.Errorf("%w: %d of %d canary members failed", ErrNotStarted, failed, f.Canary))
			}
			return results
		}
		torun = torun[f.Canary:]
	}
	r.start(ctx, torun)
	return results
}

type run[T any] struct {
	f        *fanOut
	fn       func(context.Context, *Member) (T, error)
	results  Results[T]
	failures atomic.Int64 // members that ran and failed
	reportMu sync.Mutex

	// The causes of the contexts that Timeout and OverallTimeout end.
	memberCause, overallCause *deadline
}

// start runs the members at the given indexes and waits for them.
func (r *run[T]) start(ctx context.Context, indexes []int) {
	var sem *semaphore.Weighted
	if r.f.Concurrency > 0 {
		sem = semaphore.NewWeighted(int64(r.f.Concurrency))
	}
	var wg sync.WaitGroup
	for _, i := range indexes {
		if err := r.stopped(ctx); err != nil {
			r.finish(i, err)
			continue
		}
		if sem != nil {
			if err := sem.Acquire(ctx, 1); err != nil {
				r.finish(i, r.stopped(ctx))
				continue
			}
			// Failures may have piled up while waiting for a slot.
			if err := r.stopped(ctx); err != nil {
				sem.Release(1)
				r.finish(i, err)
				continue
			}
		}
		wg.Go(func() {
			if sem != nil {
				defer sem.Release(1)
			}
			res := &r.results[i]
			r.runMember(ctx, res)
			if res.Err != nil {
				r.failures.Add(1)
			}
			r.report(i)
		})
	}
	wg.Wait()
}

// stopped is the error of a member that may not start, or nil.
func (r *run[T]) stopped(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrNotStarted, context.Cause(ctx))
	}
	if n := r.failures.Load(); r.f.StopAfter > 0 && n >= int64(r.f.StopAfter) {
		return fmt.Errorf("%w: stopped after %d failures", ErrNotStarted, n)
	}
	return nil
}

// finish records the outcome of a member that did not run.
func (r *run[T]) finish(i int, err error) {
	res := &r.results[i]
	res.Err = err
	res.Endpoint = res.Member.endpoint()
	r.report(i)
}

func (r *run[T]) report(i int) {
	if r.f.OnResult == nil {
		return
	}
	r.reportMu.Lock()
	defer r.reportMu.Unlock()
	r.f.OnResult(r.results[i].Outcome)
}

// runMember runs the member's callback, and retries it as the fan-out's options allow. The
// callback runs below as few and as small frames as can be: client-go's request path is deep, and
// every byte of stack above it brings the goroutine's first stack growth (a copy of the whole
// stack) sooner; the retry's own state lives in retried's frame, not here.
func (r *run[T]) runMember(ctx context.Context, res *Result[T]) {
	start := time.Now()
	if r.f.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, r.f.Timeout, r.memberCause)
		defer cancel()
	}
	if attempts := max(r.f.retry.Steps, 1); attempts > 1 {
		r.retried(ctx, res, attempts)
	} else {
		res.Attempts = 1
		if ctx.Done() == nil && r.f.TrackCallbacks == nil { // nothing to abandon it for, nobody to tell
			res.Value, res.Err = callInline(ctx, res.Member, r.fn)
		} else if res.Value, res.Err = call(ctx, res.Member, r.fn, r.f.TrackCallbacks); res.Err != nil && ctx.Err() != nil {
			res.Err = r.timedOut(ctx, res.Member, res.Err, 1, 1)
		}
	}
	res.Duration = time.Since(start)
	res.Endpoint = res.Member.endpoint()
}

// retried runs the member's callback up to attempts times, while what it returns is safe to
// retry (or RetryIf says so) and the wait would not pass the context's deadline.
func (r *run[T]) retried(ctx context.Context, res *Result[T], attempts int) {
	m := res.Member
	backoff := r.f.retry
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		var before *rest.Config
		if attempt < attempts { // only a retry asks whether the credentials changed meanwhile
			before = m.credentials(ctx)
		}
		res.Value, res.Err = call(ctx, m, r.fn, r.f.TrackCallbacks)
		switch {
		case res.Err == nil:
			return
		case ctx.Err() != nil:
			res.Err = r.timedOut(ctx, m, res.Err, attempt, attempts)
			return
		case attempt >= attempts:
			return
		}
		delay, ok := safeToRetry(res.Err, attempt)
		if ok && apierrors.IsUnauthorized(res.Err) && m.credentials(ctx) == before {
			ok = false // the credentials did not change since: the 401 is the member's answer to them
		}
		if !ok && (r.f.RetryIf == nil || !r.f.RetryIf(res.Err)) {
			return
		}
		delay = max(delay, backoff.Step())
		if end, ok := ctx.Deadline(); ok && time.Until(end) < delay {
			res.Err = fmt.Errorf("%w (attempt %d of %d; not retried, as the wait of %s would pass the deadline)", res.Err, attempt, attempts, delay)
			return
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			res.Err = r.timedOut(ctx, m, res.Err, attempt, attempts)
			return
		}
	}
}

// timedOut is err, from an attempt whose context ended, as a *TimeoutError when the fan-out's own
// Timeout or OverallTimeout ended it.
func (r *run[T]) timedOut(ctx context.Context, m *Member, err error, attempt, attempts int) error {
	switch cause := context.Cause(ctx); {
	case cause == error(r.memberCause) && r.memberCause != nil:
		return &TimeoutError{After: r.f.Timeout, Attempt: attempt, Attempts: attempts, Err: err, Server: m.endpoint()}
	case cause == error(r.overallCause) && r.overallCause != nil:
		return &TimeoutError{After: r.f.OverallTimeout, Overall: true, Attempt: attempt, Attempts: attempts, Err: err, Server: m.endpoint()}
	}
	return err
}

// call runs fn in a goroutine of its own, so that a callback that ignores its context still
// cannot hold up its member past its timeout, and turns a panic into an error. A context that can
// never end has nothing to abandon the callback for, so fn then runs in the caller's goroutine
// (and the goroutine's path is a function of its own, so that its frame is not on the stack
// above fn when fn runs here).
func call[T any](ctx context.Context, m *Member, fn func(context.Context, *Member) (T, error), track *sync.WaitGroup) (T, error) {
	if ctx.Done() != nil {
		return callAbandonable(ctx, m, fn, track)
	}
	if track != nil {
		track.Add(1)
		defer track.Done()
	}
	return callInline(ctx, m, fn)
}

// callAbandonable runs fn in a goroutine of its own, and returns when fn does or when ctx ends.
func callAbandonable[T any](ctx context.Context, m *Member, fn func(context.Context, *Member) (T, error), track *sync.WaitGroup) (T, error) {
	if track != nil {
		track.Add(1)
	}
	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1) // buffered: an abandoned callback can still finish and exit
	go func() {
		if track != nil {
			defer track.Done()
		}
		v, err := callInline(ctx, m, fn)
		done <- outcome{v, err}
	}()
	select {
	case o := <-done:
		return o.v, o.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}

// callInline runs fn and turns a panic into a PanicError.
func callInline[T any](ctx context.Context, m *Member, fn func(context.Context, *Member) (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return fn(ctx, m)
}
