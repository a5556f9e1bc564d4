package access

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// ServerURL turns a serverAddress (an https URL or a bare host[:port]) into the URL a client
// dials: https, with port 443 made explicit, so that two spellings of one server compare equal.
// It refuses anything else, and its errors never repeat the address, which may hold user info.
func ServerURL(address string) (*url.URL, error) {
	if !strings.Contains(address, "://") {
		address = "https://" + address
	}
	u, err := url.Parse(address)
	switch {
	case err != nil:
		return nil, fmt.Errorf("serverAddress is not a URL or host[:port]")
	case u.Scheme != "https":
		return nil, fmt.Errorf("serverAddress scheme %q is not https", u.Scheme)
	case u.User != nil:
		return nil, fmt.Errorf("serverAddress must not hold user info")
	case u.Hostname() == "":
		return nil, fmt.Errorf("serverAddress has no host")
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("serverAddress must not have a query or fragment")
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), "443")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// NoEndpointError says that no serverEndpoints entry matched the caller's client address.
type NoEndpointError struct {
	// ClientIP is the address matched against, when the caller stated one.
	ClientIP netip.Addr
	// Tried lists each entry's clientCIDR and why it did not match.
	Tried []string
}

func (e *NoEndpointError) Error() string {
	if len(e.Tried) == 0 {
		return "no serverEndpoints"
	}
	if e.ClientIP.IsValid() {
		return fmt.Sprintf("no serverEndpoints entry holds client IP %s (tried %s)", e.ClientIP, strings.Join(e.Tried, "; "))
	}
	return fmt.Sprintf("no serverEndpoints entry holds this client's address (tried %s)", strings.Join(e.Tried, "; "))
}

// SelectEndpoint picks the serverEndpoints entry whose clientCIDR holds clientIP, the longest
// prefix winning. 0.0.0.0/0 and ::/0 match every client, of either family; among entries of equal
// length the first listed wins. An IPv4 address written as IPv4-mapped IPv6 is matched as IPv4.
func SelectEndpoint(endpoints []v1alpha1.ServerAddressByClientCIDR, clientIP netip.Addr) (v1alpha1.ServerAddressByClientCIDR, error) {
	clientIP = clientIP.Unmap()
	candidates, tried := sortedCandidates(endpoints)
	for _, c := range candidates {
		if c.prefix.Bits() == 0 || c.prefix.Contains(clientIP) {
			return c.endpoint, nil
		}
		tried = append(tried, c.prefix.String()+": does not hold "+clientIP.String())
	}
	return v1alpha1.ServerAddressByClientCIDR{}, &NoEndpointError{ClientIP: clientIP, Tried: tried}
}

// localAddrFunc reports the local address the OS would use to reach a server, without sending
// anything. A variable so tests can stand in for the host's routing table.
type localAddrFunc func(ctx context.Context, server *url.URL) (netip.Addr, error)

// selectEndpointByRoute picks an endpoint when the caller did not state its client IP: for each
// entry, longest prefix first, it asks which local address the OS would use toward that entry's
// server, and takes the first entry whose clientCIDR holds it. That is the address the member
// would see the caller come from, on the path that entry describes. A /0 entry matches without a
// lookup: it holds every client, and its server's name may not resolve until the caller connects.
func selectEndpointByRoute(ctx context.Context, endpoints []v1alpha1.ServerAddressByClientCIDR, localAddr localAddrFunc) (v1alpha1.ServerAddressByClientCIDR, error) {
	candidates, tried := sortedCandidates(endpoints)
	for _, c := range candidates {
		if c.prefix.Bits() == 0 {
			return c.endpoint, nil
		}
		server, err := ServerURL(c.endpoint.ServerAddress)
		if err != nil {
			tried = append(tried, c.prefix.String()+": "+err.Error())
			continue
		}
		local, err := localAddr(ctx, server)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: no route to %s: %v", c.prefix, server.Host, err))
			continue
		}
		if c.prefix.Contains(local.Unmap()) {
			return c.endpoint, nil
		}
		tried = append(tried, fmt.Sprintf("%s: local address toward %s is %s", c.prefix, server.Host, local))
	}
	return v1alpha1.ServerAddressByClientCIDR{}, &NoEndpointError{Tried: tried}
}

type candidate struct {
	prefix   netip.Prefix
	endpoint v1alpha1.ServerAddressByClientCIDR
}

// sortedCandidates parses each entry's clientCIDR and orders the entries longest prefix first
// (ties keep their listed order); entries that do not parse are reported in tried.
func sortedCandidates(endpoints []v1alpha1.ServerAddressByClientCIDR) (candidates []candidate, tried []string) {
	for _, ep := range endpoints {
		p, err := netip.ParsePrefix(ep.ClientCIDR)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%q: not a CIDR", ep.ClientCIDR))
			continue
		}
		candidates = append(candidates, candidate{prefix: p.Masked(), endpoint: ep})
	}
	slices.SortStableFunc(candidates, func(a, b candidate) int {
		return cmp.Compare(b.prefix.Bits(), a.prefix.Bits())
	})
	return candidates, tried
}

// routeLocalAddr asks the OS which local address it would use toward server. Connecting a UDP
// socket only consults the routing table; no packet is sent.
func routeLocalAddr(ctx context.Context, server *url.URL) (netip.Addr, error) {
	host := server.Hostname()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	var lastErr error
	for _, a := range addrs {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "udp", netip.AddrPortFrom(a, 443).String())
		if err != nil {
			lastErr = err
			continue
		}
		local := conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr()
		_ = conn.Close()
		return local, nil
	}
	return netip.Addr{}, lastErr
}
