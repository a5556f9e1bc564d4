package multicluster

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Errors recorded for members that a fan-out did not run, for errors.Is.
var (
	// ErrNotStarted: the fan-out stopped before this member's turn (context ended, too many
	// failures, or a failed canary). The wrapping error says which.
	ErrNotStarted = errors.New("not started")
	// ErrNotReady: SkipNotReady was given and the member's Ready condition is False.
	ErrNotReady = errors.New("skipped: Ready condition is False")
)

// DefaultRetry is how a fan-out retries transient errors unless told otherwise: three attempts in
// all, a little over a tenth of a second apart, then twice that.
var DefaultRetry = wait.Backoff{Steps: 3, Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second}

// An Option shapes a fan-out.
type Option func(*fanOut)

type fanOut struct {
	concurrency  int
	timeout      time.Duration
	overall      time.Duration
	retry        wait.Backoff
	canary       int
	stopAfter    int
	skipNotReady bool
	onResult     func(Outcome)
}

// Concurrency runs at most n members at once; n <= 0 (the default) runs them all at once.
func Concurrency(n int) Option { return func(f *fanOut) { f.concurrency = n } }

// Timeout bounds each member's work, retries included; when it passes, the member's context is
// cancelled and the member is reported as timed out, whether or not its callback has returned.
func Timeout(d time.Duration) Option { return func(f *fanOut) { f.timeout = d } }

// OverallTimeout bounds the whole fan-out, as a deadline on its context would.
func OverallTimeout(d time.Duration) Option { return func(f *fanOut) { f.overall = d } }

// Retry sets how transient errors are retried: b.Steps is the most attempts a member gets.
// Transient errors are refused or reset connections, 5xx answers, 429 (after its Retry-After) and
// one 401, after which the Resolver rereads the member's credentials.
func Retry(b wait.Backoff) Option { return func(f *fanOut) { f.retry = b } }

// NoRetry gives each member one attempt.
func NoRetry() Option { return Retry(wait.Backoff{Steps: 1}) }

// Canary runs the first n members on their own first; if any of them fails, the rest do not run.
func Canary(n int) Option { return func(f *fanOut) { f.canary = n } }

// StopAfter starts no more members once n have failed; those already running finish.
func StopAfter(failures int) Option { return func(f *fanOut) { f.stopAfter = failures } }

// SkipNotReady does not run members whose Ready condition is False; they are reported with
// ErrNotReady. Members with no Ready condition run.
func SkipNotReady() Option { return func(f *fanOut) { f.skipNotReady = true } }

// OnResult is called as each member finishes, one call at a time, for progress reports.
func OnResult(fn func(Outcome)) Option { return func(f *fanOut) { f.onResult = fn } }

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
func Map[T any](ctx context.Context, members []*Member, fn func(context.Context, *Member) (T, error), opts ...Option) Results[T] {
	f := &fanOut{retry: DefaultRetry}
	for _, o := range opts {
		o(f)
	}
	if f.overall > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.overall)
		defer cancel()
	}
	results := make(Results[T], len(members))
	for i, m := range members {
		results[i].Member = m
	}
	run := &run[T]{f: f, fn: fn, results: results}
	if f.onResult != nil {
		run.report = &sync.Mutex{}
	}

	all := make([]int, len(members))
	for i := range all {
		all[i] = i
	}
	if f.canary > 0 && f.canary < len(all) {
		run.start(ctx, all[:f.canary])
		if failed := run.failures.Load(); failed > 0 {
			for _, i := range all[f.canary:] {
				results[i].Err = fmt.Errorf("%w: %d of %d canary members failed", ErrNotStarted, failed, f.canary)
			}
			return results
		}
		all = all[f.canary:]
	}
	run.start(ctx, all)
	return results
}

type run[T any] struct {
	f        *fanOut
	fn       func(context.Context, *Member) (T, error)
	results  Results[T]
	failures atomic.Int64
	report   *sync.Mutex
}

// start runs the members at the given indexes and waits for them.
func (r *run[T]) start(ctx context.Context, indexes []int) {
	var sem *semaphore.Weighted
	if r.f.concurrency > 0 {
		sem = semaphore.NewWeighted(int64(r.f.concurrency))
	}
	var wg sync.WaitGroup
	for _, i := range indexes {
		if err := r.stopped(ctx); err != nil {
			r.results[i].Err = err
			continue
		}
		if sem != nil {
			if err := sem.Acquire(ctx, 1); err != nil {
				r.results[i].Err = fmt.Errorf("%w: %w", ErrNotStarted, context.Cause(ctx))
				continue
			}
			// Failures may have piled up while waiting for a slot.
			if err := r.stopped(ctx); err != nil {
				sem.Release(1)
				r.results[i].Err = err
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
			if r.report != nil {
				r.report.Lock()
				defer r.report.Unlock()
				r.f.onResult(res.Outcome)
			}
		})
	}
	wg.Wait()
}

func (r *run[T]) stopped(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrNotStarted, context.Cause(ctx))
	}
	if n := r.failures.Load(); r.f.stopAfter > 0 && n >= int64(r.f.stopAfter) {
		return fmt.Errorf("%w: stopped after %d failures", ErrNotStarted, n)
	}
	return nil
}

func (r *run[T]) runMember(ctx context.Context, res *Result[T]) {
	m := res.Member
	start := time.Now()
	defer func() {
		res.Duration = time.Since(start)
		res.Endpoint = m.endpoint()
	}()
	if r.f.skipNotReady && m.Cluster().IsNotReady() {
		res.Err = ErrNotReady
		return
	}
	if r.f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.f.timeout)
		defer cancel()
	}
	backoff := r.f.retry
	steps := max(backoff.Steps, 1)
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		res.Value, res.Err = call(ctx, m, r.fn)
		if res.Err == nil {
			return
		}
		delay, ok := transient(res.Err, attempt)
		if !ok || attempt >= steps || ctx.Err() != nil {
			return
		}
		delay = max(delay, backoff.Step())
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
	}
}

// call runs fn in a goroutine of its own, so that a callback that ignores its context still
// cannot hold up its member past its timeout, and turns a panic into an error. A context that can
// never end has nothing to abandon the callback for, so fn then runs in the caller's goroutine.
func call[T any](ctx context.Context, m *Member, fn func(context.Context, *Member) (T, error)) (T, error) {
	if ctx.Done() == nil {
		return callInline(ctx, m, fn)
	}
	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1) // buffered: an abandoned callback can still finish and exit
	go func() {
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

// PanicError is a member's error when its callback panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
