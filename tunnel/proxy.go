package tunnel

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Proxy is a local HTTP CONNECT proxy that takes a client which knows nothing of tunnels, such
// as kubectl, to tunnelled members: a kubeconfig's proxy-url (ProxyURL) names the Cluster, and
// the Proxy opens the connection through the Dialer to that Cluster's agent, as the Resolver
// does. The client's TLS to the member's API server runs through it, end to end: the Proxy sees
// ciphertext only, and sends no credential of its own.
//
// It answers CONNECT only, and only for the member's API server address as its Cluster gives it:
// a request for another host or port is refused, whatever the Cluster's agent would reach.
type Proxy struct {
	// Dialer reaches the tunnel server's frontend, as the reader it serves.
	Dialer access.TunnelDialer
	// Cluster reads a Cluster of the registry.
	Cluster func(ctx context.Context, namespace, name string) (*v1alpha1.Cluster, error)
	// DialTimeout bounds opening the tunnel; 30s when zero.
	DialTimeout time.Duration
}

// ProxyURL is the proxy-url, for a kubeconfig's cluster, that has the Proxy at address (host:port)
// reach Cluster namespace/name: the Cluster is named as the proxy URL's user, which clients send
// with each CONNECT (Proxy-Authorization), so that one Proxy serves every member.
func ProxyURL(address, namespace, name string) string {
	return (&url.URL{Scheme: "http", User: url.User(namespace + "/" + name), Host: address}).String()
}

// ServeHTTP answers a CONNECT for a tunnelled member's API server by piping the connection
// through the tunnel.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	conn, status, err := p.open(r)
	if err != nil {
		if status == http.StatusProxyAuthRequired {
			w.Header().Set("Proxy-Authenticate", `Basic realm="clusterregistry: name the Cluster as namespace/name, the proxy-url's user"`)
		}
		http.Error(w, err.Error(), status)
		return
	}
	defer conn.Close()
	client, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "the connection cannot be taken over", http.StatusInternalServerError)
		return
	}
	defer client.Close()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(conn, buffered) // what the client sent after CONNECT, then the rest
		closeWrite(conn)
		close(done)
	}()
	_, _ = io.Copy(client, conn)
	closeWrite(client)
	<-done
}

// open checks the request and dials the tunnel, or says why not with an HTTP status.
func (p *Proxy) open(r *http.Request) (net.Conn, int, error) {
	if r.Method != http.MethodConnect {
		return nil, http.StatusMethodNotAllowed, errors.New("this proxy answers CONNECT only: use it as a kubeconfig's proxy-url")
	}
	namespace, name, ok := clusterOf(r.Header.Get("Proxy-Authorization"))
	if !ok {
		return nil, http.StatusProxyAuthRequired, errors.New("name the Cluster as the proxy-url's user: http://NAMESPACE%2FNAME@HOST:PORT (clusterregistry export --tunnel-proxy writes it)")
	}
	c, err := p.Cluster(r.Context(), namespace, name)
	if err != nil {
		return nil, http.StatusBadGateway, fmt.Errorf("cluster %s/%s: %w", namespace, name, err)
	}
	t := c.Spec.KubernetesAPIEndpoints.Tunnel
	if t == nil {
		return nil, http.StatusForbidden, fmt.Errorf("cluster %s/%s is dialled directly, not through a tunnel: its kubeconfig needs no proxy-url", namespace, name)
	}
	if !servesAt(c, r.Host) {
		return nil, http.StatusForbidden, fmt.Errorf("cluster %s/%s: %q is not its API server: the tunnel reaches the API server only", namespace, name, r.Host)
	}
	timeout := p.DialTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	conn, err := p.Dialer.DialContext(ctx, "tcp", access.TunnelAddress(c.Namespace, t.Agent))
	switch {
	case errors.Is(err, access.ErrAgentDisconnected):
		return nil, http.StatusServiceUnavailable, fmt.Errorf("cluster %s/%s: %w", namespace, name, err)
	case err != nil:
		return nil, http.StatusBadGateway, fmt.Errorf("cluster %s/%s: through the tunnel: %w", namespace, name, err)
	}
	return conn, http.StatusOK, nil
}

// clusterOf reads the Cluster a CONNECT names: the user of its Basic Proxy-Authorization, as
// namespace/name.
func clusterOf(header string) (namespace, name string, ok bool) {
	encoded, found := strings.CutPrefix(header, "Basic ")
	if !found {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return "", "", false
	}
	user, _, _ := strings.Cut(string(raw), ":")
	namespace, name, ok = strings.Cut(user, "/")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", false
	}
	return namespace, name, true
}

// servesAt reports whether hostport is one of the Cluster's API server addresses.
func servesAt(c *v1alpha1.Cluster, hostport string) bool {
	for _, e := range c.Spec.KubernetesAPIEndpoints.ServerEndpoints {
		u, err := access.ServerURL(e.ServerAddress)
		if err != nil {
			continue
		}
		port := u.Port()
		if port == "" {
			port = "443"
		}
		if net.JoinHostPort(u.Hostname(), port) == hostport {
			return true
		}
	}
	return false
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
