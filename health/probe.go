package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/answercap"
	"github.com/cluster-registry/sdk/internal/safetext"
	"github.com/cluster-registry/sdk/multicluster"
)

// observation is what one probe of one member saw.
type observation struct {
	// expires is when the credentials the probe used expire, zero when they do not say.
	expires time.Time
	// resolved is true when the probe had credentials, so that expires is what they say.
	resolved bool
	ready    bool
	reason   string
	message  string
	version  string
	// clusterID is the kube-system namespace's UID, or "" where the credentials cannot read it.
	clusterID string
	// opened is true when the readiness check came over a new connection, or the transport did
	// not say: the server at the other end may be another one until a probe identifies it.
	opened bool
	// identified is true when the probe read the version and the identity, as far as the
	// credentials allow: a 403 on kube-system counts, since they never will read it.
	identified bool
}

// probe checks one member as a tool would reach it: resolve its credentials, then GET /readyz
// (or /healthz), /version and the kube-system namespace, within the controller's timeout.
//
// The version and the identity are read when the readiness check came over a new connection, or
// when identify is set; otherwise they are left "" (unchanged). An open connection reaches the
// server it was opened to, whose identity cannot change under it, and an upgrade restarts the
// server and so the connection. Skipping them makes a probe one request instead of three where
// connections are kept. The caller sets identify until a probe has identified the connection it
// opened, and at least once a Heartbeat, for connections through proxies that may switch
// backends.
func (c *Controller) probe(ctx context.Context, m *multicluster.Member, identify bool) observation {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()

	resolved, err := m.Access(ctx)
	if err != nil {
		var noEndpoint *access.NoEndpointError
		if errors.As(err, &noEndpoint) {
			return observation{reason: v1alpha1.ReasonNoEndpoint, message: noEndpoint.Error()}
		}
		// The Resolver's errors name the providers and what to change, never a credential.
		return observation{reason: v1alpha1.ReasonCredentialsUnavailable, message: err.Error()}
	}
	rest, done, err := c.clientFor(m, resolved)
	if err != nil {
		return observation{reason: v1alpha1.ReasonCredentialsUnavailable, message: err.Error()}
	}
	defer done()
	issued, expires, _ := resolved.Expiry()
	o := c.probeWith(ctx, rest, identify)
	o.resolved = true
	return c.judgeExpiry(o, issued, expires, time.Now())
}

// judgeExpiry tells expired credentials apart from refused ones, and says when working ones
// expire soon.
func (c *Controller) judgeExpiry(o observation, issued, expires, now time.Time) observation {
	if expires.IsZero() {
		return o
	}
	o.expires = expires
	at := expires.UTC().Format(time.RFC3339)
	switch {
	case o.reason == v1alpha1.ReasonUnauthorized && !now.Before(expires):
		o.reason = v1alpha1.ReasonCredentialsExpired
		o.message = fmt.Sprintf("the API server refused the credentials, which expired at %s (%s ago); renew them (join again, or run a rotator)", at, since(now, expires))
	case o.ready && expires.Sub(now) < c.expiringWithin(issued, expires):
		o.reason = v1alpha1.ReasonCredentialsExpiring
		o.message = fmt.Sprintf("%s; the credentials expire at %s (in %s) and have not been renewed", o.message, at, expires.Sub(now).Round(time.Second))
	}
	return o
}

// expiringWithin is Options.ExpiringWithin, or a quarter of the credentials' lifetime.
func (c *Controller) expiringWithin(issued, expires time.Time) time.Duration {
	switch {
	case c.opts.ExpiringWithin > 0:
		return c.opts.ExpiringWithin
	case !issued.IsZero() && expires.After(issued):
		return expires.Sub(issued) / 4
	}
	return 24 * time.Hour
}

// probeWith checks the member with its client.
func (c *Controller) probeWith(ctx context.Context, rest rest.Interface, identify bool) observation {

	// Only a connection known to be reused spares the identity check. client-go retries a GET
	// whose connection failed, so one check may see several connections.
	var reused, opened bool
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if info.Reused {
			reused = true
		} else {
			opened = true
		}
	}})
	check := func(path string) (int, []byte, error) {
		var code int
		body, err := rest.Get().AbsPath(path).Do(traced).StatusCode(&code).Raw()
		return code, body, err
	}
	code, body, err := check("/readyz")
	if code == http.StatusNotFound {
		code, body, err = check("/healthz") // API servers before /readyz
	}
	newConn := opened || !reused
	fail := func(o observation) observation {
		o.opened = newConn
		return o
	}
	if o, done := c.failed(ctx, code, body, err); done {
		return fail(o)
	}
	o := observation{ready: true, reason: v1alpha1.ReasonReachable, message: "readyz answered", opened: newConn}
	if !newConn && !identify {
		return o
	}

	// Discovery's ServerVersion takes no context; a member that stops answering here would hold
	// the worker for good.
	var info version.Info
	raw, err := rest.Get().AbsPath("/version").Do(ctx).Raw()
	if err == nil {
		err = json.Unmarshal(raw, &info)
	}
	if err != nil {
		f, _ := c.failed(ctx, 0, nil, err)
		return fail(f)
	}
	o.version = reportedVersion(info.GitVersion)
	// The cluster's identity, where the credentials may read it; an answer that refuses (403) or
	// lacks it leaves the identity unknown.
	var ns metav1.PartialObjectMetadata
	raw, err = rest.Get().AbsPath("/api/v1/namespaces", metav1.NamespaceSystem).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err == nil {
		err = json.Unmarshal(raw, &ns)
	}
	var status apierrors.APIStatus
	switch {
	case err == nil:
		o.clusterID = reportedUID(string(ns.UID))
		o.identified = true
	case apierrors.IsForbidden(err):
		o.identified = true // these credentials will never read it
	case !errors.As(err, &status):
		f, _ := c.failed(ctx, 0, nil, err)
		return fail(f)
	}
	// Any other answer (a server just started answers 404 until it has made kube-system) leaves
	// the connection unidentified, and the next probe asks again.
	return o
}

// keptClient is a member's probe client with KeepConnections, and the resolved config it was
// built from.
type keptClient struct {
	config *rest.Config
	rest   rest.Interface
}

// clientFor is the client a probe uses. By default it has a connection of its own, closed when
// the probe is done, so that an idle member holds no connection and no goroutine between
// probes, at the cost of a TLS handshake per probe; with KeepConnections it uses the member's
// shared transport, whose connection stays open, through a client built once for as long as the
// member's resolved config is the same (the Resolver answers with the same Config while the
// Cluster and its credentials are unchanged, and a new one when they change): building a REST client per probe (a config copy,
// serializers, a rate limiter) cost more CPU than the probe's request. Either way the member's
// answers are read to at most maxProbeAnswer bytes.
func (c *Controller) clientFor(m *multicluster.Member, access *access.Resolved) (rest.Interface, func(), error) {
	if c.opts.KeepConnections {
		if v, ok := c.keptClients.Load(m); ok && v.(*keptClient).config == access.Config {
			return v.(*keptClient).rest, func() {}, nil
		}
	}
	cfg := rest.CopyConfig(access.Config)
	if c.opts.KeepConnections {
		shared := access.HTTPClient
		if shared == nil { // a Member made by NewMember from a rest.Config: client-go caches its transport
			var err error
			if shared, err = rest.HTTPClientFor(cfg); err != nil {
				return nil, nil, fmt.Errorf("building a client: %w", err)
			}
		}
		rt := shared.Transport
		if rt == nil {
			rt = http.DefaultTransport // what the client would use
		}
		client := &http.Client{Transport: answercap.Wrap(maxProbeAnswer)(rt), Timeout: shared.Timeout}
		rc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, client)
		if err != nil {
			return nil, nil, fmt.Errorf("building a client: %w", err)
		}
		c.keptClients.Store(m, &keptClient{config: access.Config, rest: rc.RESTClient()})
		return rc.RESTClient(), func() {}, nil
	}
	// A Proxy function keeps client-go from sharing a cached transport, whose connections would
	// outlive the probe. It is the proxy client-go uses anyway.
	cfg.Proxy = http.ProxyFromEnvironment
	cfg.Wrap(answercap.Wrap(maxProbeAnswer))
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building a client: %w", err)
	}
	rc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, client)
	if err != nil {
		return nil, nil, fmt.Errorf("building a client: %w", err)
	}
	// http.Client.CloseIdleConnections stops at client-go's wrappers; this unwraps them.
	return rc.RESTClient(), func() { utilnet.CloseIdleConnectionsFor(client.Transport) }, nil
}

// maxProbeAnswer bounds what a probe reads of one answer. client-go reads an answer whole into
// memory; a member, or whoever answers at its endpoint, could otherwise exhaust the controller's
// memory with one endless readyz. Real answers are a few kilobytes.
const maxProbeAnswer = 1 << 20

// failed turns a failed request into an observation; done is false when the request succeeded.
func (c *Controller) failed(ctx context.Context, code int, body []byte, err error) (observation, bool) {
	switch {
	case err == nil && code < 300:
		return observation{}, false
	case ctx.Err() != nil:
		return observation{reason: v1alpha1.ReasonUnreachable, message: fmt.Sprintf("no answer within %s", c.opts.Timeout)}, true
	case errors.Is(err, access.ErrAgentDisconnected):
		return observation{reason: v1alpha1.ReasonAgentDisconnected, message: "no agent of the member is connected to the tunnel server"}, true
	case untrusted(err):
		return observation{reason: v1alpha1.ReasonServerUntrusted, message: safetext.OneLine(err.Error(), 512) +
			"; no credential was sent"}, true
	case errors.Is(err, answercap.ErrTooLarge):
		return observation{reason: v1alpha1.ReasonNotReady, message: "the API server's answer exceeds " + fmt.Sprint(maxProbeAnswer>>10) + " KiB, more than any API server's"}, true
	case apierrors.IsUnauthorized(err), code == http.StatusUnauthorized:
		return observation{reason: v1alpha1.ReasonUnauthorized, message: "the API server refused the credentials (401)"}, true
	case apierrors.IsForbidden(err), code == http.StatusForbidden:
		return observation{reason: v1alpha1.ReasonUnauthorized, message: "the credentials may not read the API server's health (403)"}, true
	case code >= 500 && len(body) > 0:
		failing := failedChecks(body)
		if starting(failing) {
			return observation{reason: v1alpha1.ReasonStarting, message: checksMessage("starting: waiting for ", failing)}, true
		}
		return observation{reason: v1alpha1.ReasonNotReady, message: checksMessage("failing checks: ", failing)}, true
	case code != 0:
		return observation{reason: v1alpha1.ReasonNotReady, message: fmt.Sprintf("the API server answered %d", code)}, true
	}
	return observation{reason: v1alpha1.ReasonUnreachable, message: safetext.OneLine(err.Error(), 512)}, true
}

// untrusted reports whether err is a serving certificate's failed verification: what answered is
// not the member's API server, or not as its CA knows it.
func untrusted(err error) bool {
	var verification *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verification) || errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// failedChecks are the checks a /readyz answer marks failed ("[-]etcd failed: ...").
func failedChecks(body []byte) []string {
	var failing []string
	for line := range strings.Lines(string(body)) {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "[-]"); ok {
			name, _, _ = strings.Cut(name, " ")
			failing = append(failing, name)
		}
	}
	return failing
}

// startupChecks are the readiness checks besides the post-start hooks that a kube-apiserver
// fails while it starts: its informers' first sync, its storage client's first connection, and
// the registration of its built-in APIs (seen on a restarted v1.36 kube-apiserver).
var startupChecks = []string{"informer-sync", "etcd-readiness", "autoregister-completion"}

// starting reports whether the failing checks are those of an API server that is still
// starting: some of its post-start hooks, with at most its startup checks besides. A restarted
// kube-apiserver answers so for a second or two. Storage failing once the hooks are done (etcd,
// etcd-readiness alone) is a member that is not ready, not one that is starting.
func starting(failing []string) bool {
	hooks := false
	for _, name := range failing {
		switch {
		case strings.HasPrefix(name, "poststarthook/"):
			hooks = true
		case !slices.Contains(startupChecks, name):
			return false
		}
	}
	return hooks
}

// checksMessage names the failing checks after prefix.
func checksMessage(prefix string, failing []string) string {
	if len(failing) == 0 {
		return "readiness checks failed"
	}
	return safetext.OneLine(prefix+strings.Join(failing, ", "), 512)
}

// What a member reports goes into its Cluster's status, whose schema bounds each field. A value
// that does not fit would fail the whole status write, at every probe, and leave the status
// standing stale: whoever answers at a Cluster's endpoint could freeze what the registry says of
// it. So a version or identity that no API server would report is taken as not reported.

// reportedVersion is v if it can be a Kubernetes gitVersion (status.version: at most 64
// characters), else "".
func reportedVersion(v string) string {
	if len(v) > 64 || strings.IndexFunc(v, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune(".-+_", r))
	}) >= 0 {
		return ""
	}
	return v
}

// reportedUID is uid if it can be an object's UID (status.clusterID: at most 128 characters),
// else "": the identity is then unknown, as when the credentials may not read it.
func reportedUID(uid string) string {
	if len(uid) > 128 || strings.IndexFunc(uid, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-')
	}) >= 0 {
		return ""
	}
	return uid
}

// maxMessage bounds the Ready condition's message. The schema allows 32 KiB, and a message past
// that fails the whole status write, at every probe, freezing what the registry says of the
// Cluster. Messages quote what others wrote (a Secret's pinning annotation, a Cluster's
// endpoints, a provider's error, a member's answer), so the bound is kept here, for every
// message at once; none of the controller's own comes near it.
const maxMessage = 4096

// since is how long ago t was, for messages.
func since(now, t time.Time) time.Duration { return now.Sub(t).Round(time.Second) }
