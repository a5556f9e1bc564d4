package multicluster

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cluster-registry/sdk/internal/safetext"
)

// Outcome is what happened to one member in a fan-out.
type Outcome struct {
	Member *Member
	// Endpoint is the member's API server as last resolved, or as its Cluster lists it first.
	Endpoint string
	// Err is nil on success. ErrNotStarted marks members the fan-out did not start; ErrNotReady
	// those that SkipNotReady skipped, which are not failures (see Skipped).
	Err error
	// Attempts counts calls of the callback, retries included; 0 when the member did not run.
	Attempts int
	// Duration is the time spent on the member, retries and waits between them included.
	Duration time.Duration
}

// Skipped reports whether SkipNotReady skipped the member. A skipped member is not a failure.
func (o *Outcome) Skipped() bool { return errors.Is(o.Err, ErrNotReady) }

// NotStarted reports whether the fan-out stopped before this member's turn (a failed canary,
// StopAfter, the context's end): the callback never ran on it, so nothing was done there, but
// nothing failed there either.
func (o *Outcome) NotStarted() bool { return errors.Is(o.Err, ErrNotStarted) }

// Failed reports whether the callback ran on the member and failed. Members that were skipped or
// not started have not failed; Results.Err counts the not started too, since their work is not done.
func (o *Outcome) Failed() bool { return o.Err != nil && !o.Skipped() && !o.NotStarted() }

// Result is a member's Outcome and the value its callback returned.
type Result[T any] struct {
	Outcome
	Value T
}

// Results are a fan-out's results, one per member, in the members' order.
type Results[T any] []Result[T]

// Succeeded returns the results without an error.
func (rs Results[T]) Succeeded() Results[T] {
	return rs.filter(func(r *Result[T]) bool { return r.Err == nil })
}

// Failed returns the results of members on which the callback ran and failed; members skipped
// or not started are not among them.
func (rs Results[T]) Failed() Results[T] {
	return rs.filter(func(r *Result[T]) bool { return r.Failed() })
}

// NotStarted returns the results of members the fan-out did not start.
func (rs Results[T]) NotStarted() Results[T] {
	return rs.filter(func(r *Result[T]) bool { return r.NotStarted() })
}

// Skipped returns the results of members that SkipNotReady skipped.
func (rs Results[T]) Skipped() Results[T] {
	return rs.filter(func(r *Result[T]) bool { return r.Skipped() })
}

func (rs Results[T]) filter(keep func(*Result[T]) bool) Results[T] {
	var out Results[T]
	for i := range rs {
		if keep(&rs[i]) {
			out = append(out, rs[i])
		}
	}
	return out
}

// Err joins the errors of the members that failed or were not started, each a *MemberError that
// names the member: nil when the work was done on every member that was not skipped.
func (rs Results[T]) Err() error {
	var errs []error
	for _, r := range rs.filter(func(r *Result[T]) bool { return r.Failed() || r.NotStarted() }) {
		errs = append(errs, &MemberError{Member: r.Member, Attempts: r.Attempts, Err: r.Err})
	}
	return errors.Join(errs...)
}

// WriteTable writes one aligned row per member: member, endpoint, result, attempts, duration.
// The result is cut to one line of printable text: a member's error quotes what its API server
// (or whoever answers at its address) said, and a control character would drive the terminal of
// whoever reads the table.
// The result is the error, or on success the value when it is a string or a fmt.Stringer (so a
// callback can say "created" or "unchanged"), or else "ok".
func (rs Results[T]) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tENDPOINT\tRESULT\tATTEMPTS\tDURATION")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.Member, r.Endpoint, safetext.OneLine(r.text(), 160), r.Attempts, r.Duration.Round(time.Millisecond))
	}
	return tw.Flush()
}

// String is the table WriteTable writes.
func (rs Results[T]) String() string {
	var b strings.Builder
	_ = rs.WriteTable(&b)
	return b.String()
}

// text is the table's RESULT: the error, the value when it is a non-empty string or Stringer,
// or "ok".
func (r *Result[T]) text() string {
	if r.Err != nil {
		return tableError(r.Err)
	}
	var s string
	switch v := any(r.Value).(type) {
	case string:
		s = v
	case fmt.Stringer:
		s = v.String()
	}
	if s == "" {
		return "ok"
	}
	return s
}

// tableError is err's message with request URLs cut to their paths: the endpoint column already
// names the server, and a query string would push the cause past the column's end.
func tableError(err error) string {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Path != "" {
			msg = strings.Replace(msg, ue.Error(), fmt.Sprintf("%s %s: %v", ue.Op, u.Path, ue.Err), 1)
		}
	}
	return msg
}
