package multicluster

import (
	"errors"
	"net"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// safeToRetry reports whether a failed attempt provably did not reach the member's storage, and
// the least wait the member asked for. A 401 is worth one more: the resolution that got it is marked,
// so the next attempt resolves the member's credentials again; runMember retries it only if they
// changed.
func safeToRetry(err error, attempt int) (time.Duration, bool) {
	// The server asks the client to come back: throttled by priority and fairness, shutting down,
	// or unable to serve now. It has not acted on the request.
	if seconds, ok := apierrors.SuggestsClientDelay(err); ok {
		return time.Duration(seconds) * time.Second, true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch status.Status().Code {
		case 429:
			return 0, true
		case 401:
			return 0, attempt == 1
		}
		return 0, false
	}
	return 0, notConnected(err)
}

// notConnected reports whether err is a connection that could not be made, so that nothing was
// sent: refused, unreachable, a name that did not resolve.
func notConnected(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// IsTransient reports whether err is one that a callback safe to repeat would retry: the errors
// a fan-out retries by default, and also 5xx answers, connections reset or closed mid-request,
// and timeouts of a single request. Such a request may have been carried out before its answer
// was lost, so use it only with RetryIf for callbacks that may run twice.
func IsTransient(err error) bool {
	if _, ok := safeToRetry(err, 1); ok {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code >= 500
	}
	var netErr net.Error
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		(errors.As(err, &netErr) && netErr.Timeout())
}
