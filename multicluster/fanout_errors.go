package multicluster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors recorded for members that a fan-out did not run, for errors.Is.
var (
	// ErrNotStarted: the fan-out stopped before this member's turn (context ended, too many
	// failures, a failed canary, or invalid options). The wrapping error says which.
	ErrNotStarted = errors.New("not started")
	// ErrNotReady: SkipNotReady was given and the member's Ready condition is False. Such a
	// member is skipped, not failed.
	ErrNotReady = errors.New("skipped: Ready condition is False")
)

// MemberError is one member's failure, as Results.Err reports it; errors.As recovers it.
type MemberError struct {
	Member *Member
	// Attempts counts the calls of the callback, retries included; 0 when it never ran.
	Attempts int
	Err      error
}

func (e *MemberError) Error() string { return fmt.Sprintf("%s: %v", e.Member, e.Err) }

func (e *MemberError) Unwrap() error { return e.Err }

// TimeoutError is a member's error when its Timeout, or the fan-out's OverallTimeout, passed
// while it was running. errors.Is(err, context.DeadlineExceeded) holds.
type TimeoutError struct {
	// After is the timeout that passed.
	After time.Duration
	// Overall is true when it was the fan-out's OverallTimeout, not the member's own Timeout.
	Overall bool
	// Attempt is the attempt that was running, of Attempts allowed.
	Attempt, Attempts int
	// Err is what the callback returned, if it returned before being abandoned.
	Err error
	// Server is the member's API server as its clients resolved it (or the first its Cluster
	// lists), "" when it has none: where the call was waiting.
	Server string
}

func (e *TimeoutError) Error() string {
	what := "timed out"
	if e.Overall {
		what = "fan-out timed out"
	}
	msg := fmt.Sprintf("%s after %s, attempt %d of %d", what, e.After, e.Attempt, e.Attempts)
	if e.Server != "" {
		msg += ", member's server " + e.Server
	}
	var d *deadline
	switch {
	case e.Err != nil && e.Err != context.DeadlineExceeded && !errors.As(e.Err, &d):
		msg += ": " + e.Err.Error()
	case e.Server != "":
		// Abandoned still waiting, as a call is on a connection being opened (its TLS
		// handshake) or on an answer: said, rather than nothing.
		msg += ": the call had not returned"
	}
	return msg
}

func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

func (e *TimeoutError) Unwrap() error { return e.Err }

// deadline is the cause of a context that Timeout or OverallTimeout ended, so that a fan-out can
// tell its own deadlines from the caller's.
type deadline struct{ msg string }

func (d *deadline) Error() string { return d.msg }

func (d *deadline) Is(target error) bool { return target == context.DeadlineExceeded }

// PanicError is a member's error when its callback panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
