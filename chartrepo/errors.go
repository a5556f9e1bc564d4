package chartrepo

import "errors"

// Errors a fetch wraps, for callers that act on the kind of refusal.
var (
	// ErrRedirect: the repository answered with a redirect, which is refused.
	ErrRedirect = errors.New("redirect refused")
	// ErrOtherHost: a request would have gone to a host other than the repository's.
	ErrOtherHost = errors.New("request to another host refused")
	// ErrDigest: the chart's digest is not the one the Release pins, or the repository names.
	ErrDigest = errors.New("chart digest mismatch")
	// ErrTooLarge: an index or a chart is over its limit.
	ErrTooLarge = errors.New("too large")
	// ErrNotFound: the repository has no chart of that name, or no version that matches.
	ErrNotFound = errors.New("chart not found")
	// ErrHostNotAllowed: the repository's host is not among Options.Hosts.
	ErrHostNotAllowed = errors.New("repository host not allowed")
	// ErrPlainHTTP: the repository is plain HTTP, which the Fetcher's options do not allow.
	ErrPlainHTTP = errors.New("plain HTTP refused")
)
