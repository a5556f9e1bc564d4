package multicluster

import (
	"errors"
	"net"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// transient reports whether a failed attempt is worth another, and the least wait the member
// asked for. A 401 is worth one more: the Access that got it is marked, so the next attempt
// resolves the member's credentials again.
func transient(err error, attempt int) (time.Duration, bool) {
	if seconds, ok := apierrors.SuggestsClientDelay(err); ok && apierrors.IsTooManyRequests(err) {
		return time.Duration(seconds) * time.Second, true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		switch {
		case code == 429 || code >= 500:
			return 0, true
		case code == 401:
			return 0, attempt == 1
		}
		return 0, false
	}
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return 0, true
	case errors.As(err, &netErr) && netErr.Timeout():
		return 0, true
	}
	return 0, false
}
