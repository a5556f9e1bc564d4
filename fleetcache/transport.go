package fleetcache

import (
	"errors"
	"net/http"
	"strings"
)

// rotatingTransport sends each request of a member's caches with the member's current
// resolution (multicluster.Member.Transport), so long-lived informers pick up rotated credentials
// at their next request without being restarted, pinned to the member's server.
//
// It also tells each informer's status how its lists and watches fare, which the informer itself
// reports only on failure.
type rotatingTransport struct {
	mc   *memberCaches
	next http.RoundTripper
}

func (t *rotatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	switch {
	case err != nil:
		t.observe(req, err)
	case resp.StatusCode == http.StatusOK:
		t.observe(req, nil)
	}
	// Other answers reach the informer as errors, and its watch error handler reports them.
	return resp, err
}

// route maps the path of an informer's lists and watches to its status.
type route struct {
	suffix string
	st     *memberInformer
}

// observe records a request's outcome in the status of the informer whose path it is.
func (t *rotatingTransport) observe(req *http.Request, err error) {
	if t.mc.ctx.Err() != nil {
		return // stopping: the requests' errors say nothing about the member
	}
	if err != nil && errors.Is(err, req.Context().Err()) {
		return
	}
	t.mc.mu.Lock()
	var st *memberInformer
	for _, r := range t.mc.routes {
		if strings.HasSuffix(req.URL.Path, r.suffix) {
			st = r.st
			break
		}
	}
	t.mc.mu.Unlock()
	if st == nil {
		return
	}
	if err != nil {
		st.fail(err)
	} else {
		st.ok()
	}
}
