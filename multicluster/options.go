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

// An Option shapes a fan-out. The functions below return one each; an Options value is one too,
// for settings kept in a struct, such as a tool's flags. Options that contradict each other are
// refused: every member's result is then an error wrapping ErrInvalidOptions, and no callback
// runs, though OnResult still hears of every member.
type Option interface {
	// ApplyToFanOut sets this option's settings in o.
	ApplyToFanOut(o *Options)
}

// FanOutOptions is Options by the name that says what they configure, beside FleetOptions (a
// Fleet's): the same type, so either name serves.
type FanOutOptions = Options

// Options are a fan-out's settings (also named FanOutOptions), each field as the Option of the
// same name sets it. The zero value runs every member at once, with no timeout and DefaultRetry.
type Options struct {
	Concurrency    int
	Timeout        time.Duration
	OverallTimeout time.Duration
	// Retry nil means DefaultRetry.
	Retry        *wait.Backoff
	RetryIf      func(error) bool
	Canary       int
	StopAfter    int
	SkipNotReady bool
	OnResult     func(Outcome)
	// TrackCallbacks is the WaitGroup that TrackCallbacks sets.
	TrackCallbacks *sync.WaitGroup
}

// ApplyToFanOut sets in target every field that is set (not zero) in o, so that an Options
// value can be given with other Options and later ones win.
func (o Options) ApplyToFanOut(target *Options) {
	if o.Concurrency != 0 {
		target.Concurrency = o.Concurrency
	}
	if o.Timeout != 0 {
		target.Timeout = o.Timeout
	}
	if o.OverallTimeout != 0 {
		target.OverallTimeout = o.OverallTimeout
	}
	if o.Retry != nil {
		target.Retry = o.Retry
	}
	if o.RetryIf != nil {
		target.RetryIf = o.RetryIf
	}
	if o.Canary != 0 {
		target.Canary = o.Canary
	}
	if o.StopAfter != 0 {
		target.StopAfter = o.StopAfter
	}
	if o.SkipNotReady {
		target.SkipNotReady = true
	}
	if o.OnResult != nil {
		target.OnResult = o.OnResult
	}
	if o.TrackCallbacks != nil {
		target.TrackCallbacks = o.TrackCallbacks
	}
}

// optionFunc is an Option that sets one field.
type optionFunc func(*Options)

func (f optionFunc) ApplyToFanOut(o *Options) { f(o) }

// Concurrency runs at most n members at once; n <= 0 (the default) runs them all at once.
func Concurrency(n int) Option { return optionFunc(func(o *Options) { o.Concurrency = n }) }

// Timeout bounds each member's work, retries and the waits between them included. When it
// passes, the member's context is cancelled and the member is reported with a *TimeoutError,
// whether or not its callback has returned (see Map on callbacks left running).
func Timeout(d time.Duration) Option { return optionFunc(func(o *Options) { o.Timeout = d }) }

// OverallTimeout bounds the whole fan-out, as a deadline on its context would; members still
// running when it passes get a *TimeoutError, and those not yet started ErrNotStarted.
func OverallTimeout(d time.Duration) Option {
	return optionFunc(func(o *Options) { o.OverallTimeout = d })
}

// Retry sets how many attempts a member gets (b.Steps, at least one) and the waits between them.
//
// By default a fan-out retries only attempts that provably did not reach the member's storage,
// so that a callback that creates something never does it twice:
//   - connections that could not be made (refused, no route, no such host);
//   - answers that ask the client to come back later: 429 Too Many Requests, and any answer
//     carrying Retry-After, after waiting as long as it asks, if the member's Timeout allows;
//   - one 401, if the member's credentials changed meanwhile (the Resolver reads them again
//     after a 401): a token rotated and the old one revoked. A 401 to credentials that did not
//     change is the member's answer, and final.
//
// A 500, a reset connection or a timed-out request may have been committed by the member before
// the answer was lost; RetryIf retries them for callbacks that are safe to repeat.
func Retry(b wait.Backoff) Option { return optionFunc(func(o *Options) { o.Retry = &b }) }

// NoRetry gives each member one attempt.
func NoRetry() Option { return Retry(wait.Backoff{Steps: 1}) }

// RetryIf also retries attempts whose error retryable accepts, within Retry's attempts. Give it
// only for callbacks that may safely run twice: reads, server-side applies, updates that carry a
// resourceVersion. IsTransient accepts the errors such callbacks usually retry:
//
//	multicluster.ForEach(ctx, members, apply, multicluster.RetryIf(multicluster.IsTransient))
func RetryIf(retryable func(error) bool) Option {
	return optionFunc(func(o *Options) { o.RetryIf = retryable })
}

// Canary runs the first n members on their own first; if any of them fails, the rest do not run.
// With SkipNotReady, the canaries are the first n members that are not skipped.
func Canary(n int) Option { return optionFunc(func(o *Options) { o.Canary = n }) }

// StopAfter starts no more members once n have failed; those already running finish. It needs
// Concurrency, since without it every member has started before any can fail.
func StopAfter(failures int) Option {
	return optionFunc(func(o *Options) { o.StopAfter = failures })
}

// SkipNotReady does not run members whose Ready condition is False when the fan-out begins.
// They are reported with ErrNotReady and counted as skipped, not failed: they neither fail a
// canary nor count towards StopAfter, and Results.Failed and Results.Err leave them out.
// Members with no Ready condition, or an Unknown one, run.
func SkipNotReady() Option { return optionFunc(func(o *Options) { o.SkipNotReady = true }) }

// OnResult is called once for every member as its outcome becomes known (finished, skipped or
// not started), one call at a time, so that progress reaches the number of members.
func OnResult(fn func(Outcome)) Option { return optionFunc(func(o *Options) { o.OnResult = fn }) }

// TrackCallbacks adds every callback the fan-out runs to wg, so that wg.Wait returns once each
// has returned, those that Map stopped waiting for at their timeout included. Tests use it to
// check for leaks, and tools to shut down cleanly.
func TrackCallbacks(wg *sync.WaitGroup) Option {
	return optionFunc(func(o *Options) { o.TrackCallbacks = wg })
}

// ErrInvalidOptions is wrapped by every member's error when a fan-out's options contradict each
// other or are out of range; the message names the option.
var ErrInvalidOptions = errors.New("invalid fan-out options")

// fanOut is the Options of one fan-out, applied in order; err says why they are refused.
type fanOut struct {
	Options
	retry wait.Backoff
}

func newFanOut(opts []Option) (*fanOut, error) {
	f := &fanOut{}
	for _, o := range opts {
		if o != nil {
			o.ApplyToFanOut(&f.Options)
		}
	}
	f.retry = DefaultRetry
	if f.Retry != nil {
		f.retry = *f.Retry
	}
	// The messages are formatted only for options that are wrong: a fan-out with good ones
	// formatted five, each time, for nothing (BenchmarkForEachOverhead).
	var errs []error
	bad := func(wrong bool, format string, arg any) {
		if wrong {
			errs = append(errs, fmt.Errorf(format, arg))
		}
	}
	bad(f.Timeout < 0, "Timeout(%s) is negative", f.Timeout)
	bad(f.OverallTimeout < 0, "OverallTimeout(%s) is negative", f.OverallTimeout)
	bad(f.Canary < 0, "Canary(%d) is negative", f.Canary)
	bad(f.StopAfter < 0, "StopAfter(%d) is negative", f.StopAfter)
	bad(f.StopAfter > 0 && f.Concurrency <= 0, "StopAfter(%d) needs Concurrency: without a limit every member starts before any can fail", f.StopAfter)
	if len(errs) > 0 {
		return f, fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(errs...))
	}
	return f, nil
}
