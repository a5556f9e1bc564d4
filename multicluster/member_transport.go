package multicluster

import (
	"fmt"
	"net/http"
)

// Transport is an http.RoundTripper that sends each request with the member's current
// resolution: its credentials, CA and pinning to its server, as the Resolver answers at the time
// of the request (cached, and allocation-free while nothing changed). Clients that live as long
// as the member, such as informers and controller-runtime clusters, are built on it so that a
// rotated Secret or token file is used at their next request, and at once after a 401, without
// rebuilding them. Requests carry the member's server in their URL already (build the client on
// the member's Config); the resolution's own transport refuses to send them elsewhere.
func (m *Member) Transport() http.RoundTripper { return memberTransport{m} }

type memberTransport struct{ m *Member }

func (t memberTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, err := t.m.Access(req.Context())
	if err != nil {
		return nil, err
	}
	if a.HTTPClient == nil || a.HTTPClient.Transport == nil {
		return nil, fmt.Errorf("member %s: its resolution has no HTTP client", t.m)
	}
	return a.HTTPClient.Transport.RoundTrip(req)
}
