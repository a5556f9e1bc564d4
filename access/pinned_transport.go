package access

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Pinning is checked when a Cluster is resolved, and again on every request the Resolved
// sends. Whatever answers at the member's address (a tenant's pod behind the services/pods proxy
// subresource, an aggregated API, a gateway) can redirect a client, and client-go's bearer-token
// and exec round trippers add the credential again on every hop, below the header stripping that
// Go's http.Client does on cross-host redirects. So the check lives in the transport that
// Resolved.Config carries (its WrapTransport, innermost, right above the connection): every client
// built from that config, the Resolved's HTTPClient, clientsets, dynamic and discovery clients,
// controller-runtime's client and the health probe, refuses a request for any other server before
// it dials, so neither a header nor a client certificate leaves for it.

// OffServerError is the error for a request that a member's client refused to send because it was
// for another server than the one the member's credentials were resolved for: in practice a
// redirect that the member, or whatever answers at its address, sent. It matches
// ErrUnpinnedSecret. It names the cluster and both servers, never a credential.
type OffServerError struct {
	// Cluster is the member, namespace/name.
	Cluster string
	// Server is the member's resolved server: scheme://host:port, and its path where it has one.
	Server string
	// Target is the server the request was for, scheme://host:port.
	Target string
	// RedirectStatus is the status of the answer that redirected the client to Target (301, 302,
	// 303, 307, 308), or 0 when the request was made for Target directly.
	RedirectStatus int
}

func (e *OffServerError) Error() string {
	if e.RedirectStatus != 0 {
		return fmt.Sprintf("cluster %s: refused to follow a %d redirect from %s to %s: the member's credentials go only to the server it was resolved to",
			e.Cluster, e.RedirectStatus, e.Server, e.Target)
	}
	return fmt.Sprintf("cluster %s: refused a request for %s: the member's credentials go only to the server it was resolved to, %s",
		e.Cluster, e.Target, e.Server)
}

func (e *OffServerError) Unwrap() error { return ErrUnpinnedSecret }

// pinTo returns a WrapTransport function that lets requests through to server only.
func pinTo(cluster string, server *url.URL) func(http.RoundTripper) http.RoundTripper {
	origin := originOf(server)
	prefix := strings.TrimSuffix(path.Clean("/"+server.Path), "/")
	display := origin + prefix
	return func(next http.RoundTripper) http.RoundTripper {
		return &pinnedTransport{next: next, cluster: cluster, scheme: server.Scheme, host: server.Host,
			origin: origin, prefix: prefix, display: display}
	}
}

// pinnedTransport refuses requests for any server but the member's.
type pinnedTransport struct {
	next    http.RoundTripper
	cluster string
	// scheme and host are the server's as resolved: every request the config's clients make has
	// them, so comparing them first spares the hot path building the origin.
	scheme, host string
	// origin is scheme://host:port, lower case, with the scheme's default port made explicit.
	origin string
	// prefix is the server's path without its trailing slash ("" for none): a gateway that serves
	// several clusters under paths of one host must not redirect one cluster's credentials to
	// another's path.
	prefix  string
	display string
}

func (p *pinnedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	sameOrigin := req.URL.Scheme == p.scheme && req.URL.Host == p.host || originOf(req.URL) == p.origin
	if !sameOrigin || !underPrefix(req.URL.Path, p.prefix) {
		target := originOf(req.URL)
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even when it fails
		}
		err := &OffServerError{Cluster: p.cluster, Server: p.display, Target: target}
		if req.Response != nil { // set by http.Client on the requests it makes for redirects
			err.RedirectStatus = req.Response.StatusCode
		}
		return nil, err
	}
	return p.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's debugging, cancellation and CloseIdleConnectionsFor see
// through the check.
func (p *pinnedTransport) WrappedRoundTripper() http.RoundTripper { return p.next }

// originOf is scheme://host:port of u, lower case, with the scheme's default port written out, so
// that https://h and https://H:443 are one origin.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// underPrefix reports whether p, cleaned of dot segments, is prefix or lies below it.
func underPrefix(p, prefix string) bool {
	if prefix == "" {
		return true
	}
	clean := path.Clean("/" + p)
	return clean == prefix || strings.HasPrefix(clean, prefix+"/")
}
