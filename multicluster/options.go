package multicluster

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultRetry is how often and how far apart a fan-out retries what is safe to retry (see
// Retry): three attempts in all, a little over a tenth of a second apart, then twice that.
var DefaultRetry = wait.Backoff{Steps: 3, Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second}

// An Option shapes a fan-out. Options that contradict each other are refused: every member's
// result is then an error wrapping ErrInvalidOptions, and no callback runs.
type Option func(*fanOut)

type fanOut struct {
	concurrency  int
	timeout      time.Duration
	overall      time.Duration
	retry        wait.Backoff
	retryIf      func(error) bool
	canary       int
	stopAfter    int
	skipNotReady bool
	onResult     func(Outcome)
	track        *sync.WaitGroup
}

// Concurrency runs at most n members at once; n <= 0 (the default) runs them all at once.
func Concurrency(n int) Option { return func(f *fanOut) { f.concurrency = n } }

// Timeout bounds each member's work, retries and the waits between them included. When it
// passes, the member's context is cancelled and the member is reported with a *TimeoutError,
// whether or not its callback has returned (see Map on callbacks left running).
func Timeout(d time.Duration) Option { return func(f *fanOut) { f.timeout = d } }

// OverallTimeout bounds the whole fan-out, as a deadline on its context would; members still
// running when it passes get a *TimeoutError, and those not yet started ErrNotStarted.
func OverallTimeout(d time.Duration) Option { return func(f *fanOut) { f.overall = d } }

// Retry sets how many attempts a member gets (b.Steps, at least one) and the waits between them.
//
// By default a fan-out retries only attempts that provably did not reach the member's storage,
// so that a callback that creates something never does it twice:
//   - connections that could not be made (refused, no route, no such host);
//   - answers that ask the client to come back later: 429 Too Many Requests, and any answer
//     carrying Retry-After, after waiting as long as it asks, if the member's Timeout allows;
//   - one 401, after which the Resolver reads the member's credentials again.
//
// A 500, a reset connection or a timed-out request may have been committed by the member before
// the answer was lost; RetryIf retries them for callbacks that are safe to repeat.
func Retry(b wait.Backoff) Option { return func(f *fanOut) { f.retry = b } }

// NoRetry gives each member one attempt.
func NoRetry() Option { return Retry(wait.Backoff{Steps: 1}) }

// RetryIf also retries attempts whose error retryable accepts, within Retry's attempts. Give it
// only for callbacks that may safely run twice: reads, server-side applies, updates that carry a
// resourceVersion. IsTransient accepts the errors such callbacks usually retry:
//
//	multicluster.ForEach(ctx, members, apply, multicluster.RetryIf(multicluster.IsTransient))
func RetryIf(retryable func(error) bool) Option { return func(f *fanOut) { f.retryIf = retryable } }

// Canary runs the first n members on their own first; if any of them fails, the rest do not run.
// With SkipNotReady, the canaries are the first n members that are not skipped.
func Canary(n int) Option { return func(f *fanOut) { f.canary = n } }

// StopAfter starts no more members once n have failed; those already running finish. It needs
// Concurrency, since without it every member has started before any can fail.
func StopAfter(failures int) Option { return func(f *fanOut) { f.stopAfter = failures } }

// SkipNotReady does not run members whose Ready condition is False when the fan-out begins.
// They are reported with ErrNotReady and counted as skipped, not failed: they neither fail a
// canary nor count towards StopAfter, and Results.Failed and Results.Err leave them out.
// Members with no Ready condition, or an Unknown one, run.
func SkipNotReady() Option { return func(f *fanOut) { f.skipNotReady = true } }

// OnResult is called once for every member as its outcome becomes known (finished, skipped or
// not started), one call at a time, so that progress reaches the number of members.
func OnResult(fn func(Outcome)) Option { return func(f *fanOut) { f.onResult = fn } }

// TrackCallbacks adds every callback the fan-out runs to wg, so that wg.Wait returns once each
// has returned, those that Map stopped waiting for at their timeout included. Tests use it to
// check for leaks, and tools to shut down cleanly.
func TrackCallbacks(wg *sync.WaitGroup) Option { return func(f *fanOut) { f.track = wg } }

// ErrInvalidOptions is wrapped by every member's error when a fan-out's options contradict each
// other or are out of range; the message names the option.
var ErrInvalidOptions = errors.New("invalid fan-out options")

func newFanOut(opts []Option) (*fanOut, error) {
	f := &fanOut{retry: DefaultRetry}
	for _, o := range opts {
		o(f)
	}
	var errs []error
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{f.timeout < 0, fmt.Sprintf("Timeout(%s) is negative", f.timeout)},
		{f.overall < 0, fmt.Sprintf("OverallTimeout(%s) is negative", f.overall)},
		{f.canary < 0, fmt.Sprintf("Canary(%d) is negative", f.canary)},
		{f.stopAfter < 0, fmt.Sprintf("StopAfter(%d) is negative", f.stopAfter)},
		{f.stopAfter > 0 && f.concurrency <= 0, fmt.Sprintf("StopAfter(%d) needs Concurrency: without a limit every member starts before any can fail", f.stopAfter)},
	} {
		if c.bad {
			errs = append(errs, errors.New(c.msg))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	return f, nil
}
