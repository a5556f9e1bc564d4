package chartrepo

import (
	"fmt"
	"net/http"
	"net/url"
)

// pinned is the transport of one fetch: every request goes to origin (the repository's scheme,
// host and port) or not at all, and a redirect is an error rather than a new request. It is the
// transport, not the http.Client's redirect policy, that refuses: OCI's client builds http.Clients
// of its own over the transport it is given.
type pinned struct {
	base   http.RoundTripper
	origin *url.URL
}

func (p *pinned) RoundTrip(req *http.Request) (*http.Response, error) {
	if o, err := originOf(req.URL.String()); err != nil || o.Scheme != p.origin.Scheme || o.Host != p.origin.Host {
		return nil, fmt.Errorf("%w: %s is not the repository's %s", ErrOtherHost, where(req.URL), p.origin)
	}
	resp, err := p.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != "" {
		resp.Body.Close()
		to := resp.Header.Get("Location")
		if u, err := req.URL.Parse(to); err == nil {
			to = where(u)
		}
		return nil, fmt.Errorf("%w: %s redirected to %s", ErrRedirect, where(req.URL), to)
	}
	return resp, nil
}

// where is a URL for an error: without user info, query or fragment, which may hold tokens.
func where(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
