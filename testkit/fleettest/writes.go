package fleettest

import (
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// CountClusterWrites is cfg with each write of a Cluster (a PATCH under /clusters/, as
// server-side apply of its status makes) counted in writes: how a benchmark or test counts a
// controller's registry writes from outside it.
func CountClusterWrites(cfg *rest.Config, writes *atomic.Int64) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/clusters/") {
				writes.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

// RoundTripperFunc is a function as an http.RoundTripper.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
