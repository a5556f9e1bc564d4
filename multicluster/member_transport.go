package multicluster

import (
	"fmt"
	"io"
	"net/http"

	"github.com/cluster-registry/sdk/access"
)

// Transport is an http.RoundTripper that sends each request with the member's current
// resolution: its credentials, CA and pinning to its server, as the Resolver answers at the time
// of the request (cached, and allocation-free while nothing changed). Clients that live as long
// as the member, such as informers and controller-runtime clusters, are built on it so that a
// rotated Secret or token file is used at their next request, and at once after a 401, without
// rebuilding them. A request refused with 401 is sent once more, and only then, if the member's
// credentials changed meanwhile (a rotation): a 401 means the member did not act on it. A body
// that cannot be sent twice (no GetBody) is not retried. Requests carry the member's server in
// their URL already (build the client on the member's Config); the resolution's own transport
// refuses to send them elsewhere.
func (m *Member) Transport() http.RoundTripper { return memberTransport{m} }

type memberTransport struct{ m *Member }

func (t memberTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, err := t.m.Access(req.Context())
	if err != nil {
		return nil, err
	}
	resp, err := roundTrip(t.m, a, req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	// The resolution that got the 401 is marked, so this reads the credentials again.
	fresh, ferr := t.m.Access(req.Context())
	if ferr != nil || fresh.Config == a.Config {
		return resp, nil // the same credentials: the 401 is the member's answer to them
	}
	retry := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return resp, nil // a body that cannot be sent twice
		}
		if retry.Body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return roundTrip(t.m, fresh, retry)
}

func roundTrip(m *Member, a *access.Resolved, req *http.Request) (*http.Response, error) {
	if a.HTTPClient == nil || a.HTTPClient.Transport == nil {
		return nil, fmt.Errorf("member %s: its resolution has no HTTP client", m)
	}
	return a.HTTPClient.Transport.RoundTrip(req)
}
