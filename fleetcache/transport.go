package fleetcache

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// rotatingTransport sends each request of a member's caches with the member's current
// resolution: the Resolver's answer is cached and costs no allocation, and changes when the
// credentials behind the Cluster rotate or after the member answered 401, so long-lived informers
// pick up new credentials at their next request without being restarted. The resolution's own
// transport pins the request to the member's server.
//
// It also tells each informer's status how its lists and watches fare, which the informer itself
// reports only on failure.
type rotatingTransport struct{ mc *memberCaches }

func (t *rotatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, err := t.mc.member.Access(req.Context())
	if err != nil {
		t.observe(req, err)
		return nil, err
	}
	if a.HTTPClient == nil || a.HTTPClient.Transport == nil {
		err := fmt.Errorf("member %s: its resolution has no HTTP client", t.mc.member)
		t.observe(req, err)
		return nil, err
	}
	resp, err := a.HTTPClient.Transport.RoundTrip(req)
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
