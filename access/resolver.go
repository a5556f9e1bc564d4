package access

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/answercap"
)

// DefaultRevalidateAfter is how long a resolution is trusted before the Resolver reads its inputs
// (Secrets, files) again. Unchanged inputs keep the same config and transport.
const DefaultRevalidateAfter = 30 * time.Second

// ResolverOptions configures a Resolver. The zero value resolves only what needs none of the caller's
// trust: reading Secrets needs Secrets, reading files needs FileRoots, running exec plugins needs
// ExecPlugins. A Cluster is written by others, so each is the caller's explicit choice, and
// credentials from the caller's side (files, plugins) go only to the servers the caller ties them
// to (FileRoot.SendTo, ExecPlugin.SendTo).
type ResolverOptions struct {
	// Secrets reads Secrets from the registry's cluster with the caller's permissions, for the
	// secret and kubeconfig-secret types. See SecretsFromClient and SecretsFromLister.
	Secrets SecretGetter

	// Prefer lists provider types in the caller's order of preference: a controller might prefer
	// secret and token-file, a person exec and kubeconfig-file. The first of a Cluster's providers
	// of the most preferred type that resolves is used; types not listed are not used. Empty means
	// the Cluster's own order, any type.
	Prefer []string

	// ClientIP is the caller's address as members see it, for choosing among a Cluster's
	// serverEndpoints. When unset, the Resolver asks the OS which local address it would use
	// toward each candidate server.
	ClientIP netip.Addr

	// SecretNamespaces lists namespaces other than a Cluster's own from which its providers may
	// read Secrets; "*" allows all.
	SecretNamespaces []string
	// AllowUnpinnedSecrets sends a Secret's credentials to whatever server the Cluster names when
	// the Secret names no servers of its own. Off by default: see CheckPinned.
	AllowUnpinnedSecrets bool

	// ExecPlugins lists the exec plugins that providers may run, with the args, environment and
	// cluster config each gets, and the servers its credentials may be sent to. A plugin not listed
	// does not run. See ExecPlugin.
	ExecPlugins []ExecPlugin
	// FileRoots lists the directories under which token-file and kubeconfig-file paths (and the
	// files a kubeconfig names) may be read, and where the credentials read there may be sent.
	// See FileRoot.
	FileRoots []FileRoot
	// AllowKubeconfigSecretRefs lets a kubeconfig Secret's user name files (tokenFile,
	// client-certificate, client-key, certificate-authority) and exec plugins on the caller's side.
	// Off by default: the Secret's own server pins only the data inside the Secret, so each such
	// file or plugin must still lie under FileRoots or ExecPlugins, and their SendTo must allow the
	// server, as if a Cluster named it directly.
	AllowKubeconfigSecretRefs bool

	// Tunnel reaches the members whose Cluster says they are reached through a tunnel
	// (spec.kubernetesApiEndpoints.tunnel): see the tunnel package's Dialer. Without it, such
	// Clusters do not resolve (ErrNoTunnel). The tunnel carries TCP only: TLS to the member's API
	// server, its CA and its pinning hold as for a direct connection.
	Tunnel TunnelDialer

	// InsecureSkipTLSVerify turns off verification of members' serving certificates.
	InsecureSkipTLSVerify bool

	// Providers adds provider types, or replaces built-in ones, by type name.
	Providers map[string]Provider

	// QPS, when positive, limits each member's clients to that many requests a second on the
	// client side, in bursts of up to Burst (default twice QPS). By default there is no
	// client-side limit: API servers protect themselves with API Priority and Fairness, which is
	// why SIG API Machinery advises against client-side limits and controller-runtime dropped its
	// own. client-go's default (5 a second) would throttle a fleet's repeated fan-outs.
	QPS   float32
	Burst int

	// MaxAnswerBytes, when positive, bounds what every client built from a Resolved's Config
	// reads of each answer from the member: past it, the read fails with an error that wraps
	// ErrAnswerTooLarge. client-go reads an answer whole into memory, so without a bound a
	// member, or whatever answers at its address (a tenant's pod behind the proxy subresource),
	// can make a tool hold as much as it sends until the request's deadline; with one, a fan-out
	// over hostile members holds at most this much per member at a time. A watch is a stream
	// meant to last and is not bounded as a whole, but each of its events is (JSON and
	// protobuf): past it, the watch ends with an error event. Set it above the largest list you
	// read in one page (client-go's informers list 500 objects a page). By default, 0, there is
	// no bound.
	MaxAnswerBytes int64

	// RevalidateAfter overrides DefaultRevalidateAfter.
	RevalidateAfter time.Duration
	// UserAgent is set on the configs the Resolver returns.
	UserAgent string
	// Logger receives the Resolver's logs, which never hold credentials.
	Logger logr.Logger
}

// Resolved is a Cluster resolved: how to reach its API server, with whose credentials.
type Resolved struct {
	// Config reaches the member. It is shared by every caller that resolves the same inputs: copy
	// it with rest.CopyConfig before changing it. Its WrapTransport refuses, with an
	// *OffServerError, every request for another server than Server (a redirect elsewhere, say),
	// in every client built from it: add wrappers of your own with Config.Wrap, which keeps it;
	// setting WrapTransport would drop it.
	Config *rest.Config
	// HTTPClient is built once from Config; pass it to the clientsets' NewForConfigAndClient so
	// that they share its connections.
	HTTPClient *http.Client
	// Server is the member's API server, chosen from the Cluster's serverEndpoints.
	Server *url.URL
	// Provider and ProviderType name the auth provider whose credentials are in use.
	Provider, ProviderType string

	// server is Server as a string, made once: every fan-out result reports it.
	server string
	// tunnelAgent is the agent the member is reached through, "" when it is dialled: what
	// CheckPinned holds a Secret's v1alpha1.TunnelAgentAnnotation to.
	tunnelAgent string
	// unauthorized is set when the member answers 401, so that the next Resolve rereads the inputs.
	unauthorized *atomic.Bool
	// validUntil is when the inputs must be read again, in Unix nanoseconds of the clock of
	// owner, the Resolver that made it; Forget sets it to 0.
	validUntil atomic.Int64
	owner      *Resolver
	// expiry is Expiry's answer, read from the credentials once.
	expiry struct {
		once            sync.Once
		issued, expires time.Time
		ok              bool
	}
}

// Expiry is when the credentials expire, as Expiry(a.Config) says, read once per resolution:
// callers that ask at every request or probe pay for it once.
func (a *Resolved) Expiry() (issued, expires time.Time, ok bool) {
	a.expiry.once.Do(func() { a.expiry.issued, a.expiry.expires, a.expiry.ok = Expiry(a.Config) })
	return a.expiry.issued, a.expiry.expires, a.expiry.ok
}

// Current reports whether Resolve, asked again for the same Cluster object, would answer with it
// without reading anything: the member has not answered 401 since, the credentials are not yet
// due to be read again (ResolverOptions.RevalidateAfter), and the Resolver has not forgotten the
// Cluster. A caller that keeps a Resolved beside the Cluster object it came from, an object that
// nobody changes (as an informer's), may use it while Current holds and call Resolve when it does
// not; multicluster's Members do, so that a call on a member reads two atomics, not the spec. A
// Resolved made by hand is never current.
func (a *Resolved) Current() bool {
	return a.unauthorized != nil && !a.unauthorized.Load() && a.owner.now().UnixNano() < a.validUntil.Load()
}

// Endpoint is Server as a string, made once (every fan-out result reports it), or the Config's
// Host for a Resolved made by hand.
func (a *Resolved) Endpoint() string {
	switch {
	case a.server != "":
		return a.server
	case a.Server != nil:
		return a.Server.String()
	case a.Config != nil:
		return a.Config.Host
	}
	return ""
}

// Resolver turns Clusters into Resolved configs for their members. It caches each Cluster's resolution,
// keyed by a fingerprint of every input that shaped it, and is safe for concurrent use.
type Resolver struct {
	opts      ResolverOptions
	providers map[string]Provider
	fileRoots []string
	log       logr.Logger

	localAddr localAddrFunc
	now       func() time.Time

	mu      sync.RWMutex
	entries map[types.NamespacedName]*entry
	flights singleflight.Group
}

// entry is a Cluster's resolution: its access is valid until access.validUntil.
type entry struct {
	uid      types.UID
	specHash uint64
	inputs   [sha256.Size]byte
	access   *Resolved
}

// NewResolver returns a Resolver with the built-in provider types and any in opts.Providers.
func NewResolver(opts ResolverOptions) (*Resolver, error) {
	r := &Resolver{
		opts:      opts,
		providers: builtinProviders(),
		log:       opts.Logger,
		localAddr: routeLocalAddr,
		now:       time.Now,
		entries:   map[types.NamespacedName]*entry{},
	}
	if r.log.GetSink() == nil {
		r.log = logr.Discard()
	}
	if r.opts.RevalidateAfter <= 0 {
		r.opts.RevalidateAfter = DefaultRevalidateAfter
	}
	if r.opts.MaxAnswerBytes < 0 {
		return nil, fmt.Errorf("ResolverOptions.MaxAnswerBytes is %d: want 0 (no bound) or more", r.opts.MaxAnswerBytes)
	}
	if r.opts.QPS <= 0 {
		r.opts.QPS, r.opts.Burst = -1, 0 // client-go's "no rate limiter"
	} else if r.opts.Burst <= 0 {
		r.opts.Burst = max(1, int(2*r.opts.QPS))
	}
	for name, p := range opts.Providers {
		if p == nil {
			return nil, fmt.Errorf("ResolverOptions.Providers[%q] is nil", name)
		}
		r.providers[name] = p
	}
	for _, t := range opts.Prefer {
		if r.providers[t] == nil {
			return nil, fmt.Errorf("ResolverOptions.Prefer names %q: %w", t, ErrUnknownProviderType)
		}
	}
	for i, root := range opts.FileRoots {
		option := fmt.Sprintf("ResolverOptions.FileRoots[%d]", i)
		if root.Dir == "" {
			return nil, fmt.Errorf("%s.Dir is empty", option)
		}
		expanded, err := expandHome(root.Dir)
		if err != nil {
			return nil, fmt.Errorf("%s.Dir: %w", option, err)
		}
		abs, err := filepath.Abs(expanded)
		if err != nil {
			return nil, fmt.Errorf("%s.Dir %q: %w", option, root.Dir, err)
		}
		// Compared with paths whose links are followed, so follow the root's too.
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		r.fileRoots = append(r.fileRoots, abs)
		if err := validateMatcher(root.SendTo); err != nil {
			return nil, fmt.Errorf("%s.SendTo: %w", option, err)
		}
	}
	for i, p := range opts.ExecPlugins {
		option := fmt.Sprintf("ResolverOptions.ExecPlugins[%d]", i)
		if p.Command == "" {
			return nil, fmt.Errorf("%s.Command is empty", option)
		}
		for name := range p.Env {
			if !envNameRE.MatchString(name) {
				return nil, fmt.Errorf("%s.Env: %q is not a variable name", option, name)
			}
		}
		if err := validateMatcher(p.SendTo); err != nil {
			return nil, fmt.Errorf("%s.SendTo: %w", option, err)
		}
		if p.ClusterArgs && p.ArgsPattern != nil {
			return nil, fmt.Errorf("%s: ClusterArgs lets Clusters choose any args, so ArgsPattern would not limit them; set one of the two", option)
		}
	}
	r.opts.FileRoots = slices.Clone(opts.FileRoots)
	r.opts.ExecPlugins = slices.Clone(opts.ExecPlugins)
	return r, nil
}

// Resolve returns how to reach the member c describes. While c's spec and the inputs its provider
// read are unchanged it returns the same Resolved, without allocating; a Secret or file that
// changed, or a 401 from the member, leads to fresh credentials on the next call.
//
// Errors are *ClusterError, wrapping *NoEndpointError, *NoProviderError (which wraps each
// provider's *ProviderError, and through them *PinningError, ErrNotAllowed, ...).
func (r *Resolver) Resolve(ctx context.Context, c *v1alpha1.Cluster) (*Resolved, error) {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	specHash := ReachDigest(&c.Spec)
	r.mu.RLock()
	e := r.entries[key]
	r.mu.RUnlock()
	if e != nil && e.uid == c.UID && e.specHash == specHash && e.access.Current() {
		return e.access, nil
	}
	return r.resolveShared(ctx, key, c, specHash)
}

// Config is Resolve for callers that want only the rest.Config.
func (r *Resolver) Config(ctx context.Context, c *v1alpha1.Cluster) (*rest.Config, error) {
	a, err := r.Resolve(ctx, c)
	if err != nil {
		return nil, err
	}
	return a.Config, nil
}

// Forget drops the cached resolution of a Cluster, as when it is removed from the registry.
func (r *Resolver) Forget(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	r.mu.Lock()
	if e := r.entries[key]; e != nil {
		e.access.validUntil.Store(0) // whoever keeps it resolves again
	}
	delete(r.entries, key)
	r.mu.Unlock()
}

// Len reports how many Clusters have a cached resolution.
func (r *Resolver) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.entries)
}

// resolveShared makes concurrent callers for the same Cluster and spec share one resolution.
func (r *Resolver) resolveShared(ctx context.Context, key types.NamespacedName, c *v1alpha1.Cluster, specHash uint64) (*Resolved, error) {
	flight := fmt.Sprintf("%s/%s/%s/%x", key.Namespace, key.Name, c.UID, specHash)
	v, err, _ := r.flights.Do(flight, func() (any, error) {
		return r.resolve(ctx, key, c, specHash)
	})
	// Another caller's cancelled context must not fail this one.
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return r.resolve(ctx, key, c, specHash)
	}
	if err != nil {
		return nil, err
	}
	return v.(*Resolved), nil
}

func (r *Resolver) resolve(ctx context.Context, key types.NamespacedName, c *v1alpha1.Cluster, specHash uint64) (*Resolved, error) {
	clusterErr := func(provider string, err error) error {
		return &ClusterError{Namespace: key.Namespace, Name: key.Name, Provider: provider, Err: err}
	}
	server, err := r.selectServer(ctx, c)
	if err != nil {
		return nil, clusterErr("", err)
	}
	creds, provider, err := r.credentials(ctx, c, server)
	if err != nil {
		return nil, clusterErr("", err)
	}
	// A credential that carries its own CA (a Secret's ca.crt, a kubeconfig's CA) is verified by
	// that CA alone: otherwise whoever edits the Cluster could set a caBundle of theirs and receive
	// the credential at the pinned address, from anywhere on the network path to it.
	caData := creds.CAData
	if len(caData) == 0 {
		caData = c.Spec.KubernetesAPIEndpoints.CABundle
	}
	dial, err := r.tunnelDial(c)
	if err != nil {
		return nil, clusterErr("", err)
	}
	inputs := r.fingerprint(server, caData, provider, creds, c.Spec.KubernetesAPIEndpoints.Tunnel)

	r.mu.RLock()
	old := r.entries[key]
	r.mu.RUnlock()
	var access *Resolved
	if old != nil && old.uid == c.UID && old.inputs == inputs {
		// The inputs are what they were: keep the config and its transport, and so its connections.
		access = old.access
		access.unauthorized.Store(false)
		r.log.V(2).Info("revalidated cluster", "cluster", key, "server", server.String())
	} else {
		if access, err = r.build(key, server, caData, provider, creds, dial); err != nil {
			return nil, clusterErr(provider.Name, err)
		}
		access.tunnelAgent = tunnelAgent(c)
		r.log.V(1).Info("resolved cluster", "cluster", key, "server", server.String(),
			"provider", provider.Name, "type", provider.Type.Name)
	}
	e := &entry{uid: c.UID, specHash: specHash, inputs: inputs, access: access}
	access.validUntil.Store(r.now().Add(r.opts.RevalidateAfter).UnixNano())
	r.mu.Lock()
	r.entries[key] = e
	r.mu.Unlock()
	return access, nil
}

func (r *Resolver) selectServer(ctx context.Context, c *v1alpha1.Cluster) (*url.URL, error) {
	eps := c.Spec.KubernetesAPIEndpoints.ServerEndpoints
	var ep v1alpha1.ServerAddressByClientCIDR
	var err error
	if r.opts.ClientIP.IsValid() {
		ep, err = SelectEndpoint(eps, r.opts.ClientIP)
	} else {
		ep, err = selectEndpointByRoute(ctx, eps, r.localAddr)
	}
	if err != nil {
		return nil, err
	}
	server, err := ServerURL(ep.ServerAddress)
	if err != nil {
		return nil, fmt.Errorf("serverEndpoints entry for %s: %w", ep.ClientCIDR, err)
	}
	return server, nil
}

// credentials tries the Cluster's providers in the caller's order of preference and returns the
// first that resolves, or why none did.
func (r *Resolver) credentials(ctx context.Context, c *v1alpha1.Cluster, server *url.URL) (*Credentials, *v1alpha1.AuthProviderConfig, error) {
	noneErr := &NoProviderError{Preferred: r.opts.Prefer}
	for _, p := range r.ordered(c.Spec.AuthInfo.Providers, noneErr) {
		impl := r.providers[p.Type.Name]
		if impl == nil {
			noneErr.Reasons = append(noneErr.Reasons, &ProviderError{Provider: p.Name, Type: p.Type.Name, Err: ErrUnknownProviderType})
			continue
		}
		creds, err := impl.Credentials(ctx, &Request{Cluster: c, Provider: p, Server: server, resolver: r})
		if err == nil && creds == nil {
			err = errors.New("provider returned no credentials")
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			noneErr.Reasons = append(noneErr.Reasons, &ProviderError{Provider: p.Name, Type: p.Type.Name, Err: err})
			continue
		}
		return creds, p, nil
	}
	return nil, nil, noneErr
}

// ordered lists the providers to try: by the caller's preference of types, each type's providers
// in the Cluster's order. Providers of types the caller does not prefer are noted in noneErr.
func (r *Resolver) ordered(providers []v1alpha1.AuthProviderConfig, noneErr *NoProviderError) []*v1alpha1.AuthProviderConfig {
	var out []*v1alpha1.AuthProviderConfig
	if len(r.opts.Prefer) == 0 {
		for i := range providers {
			out = append(out, &providers[i])
		}
		return out
	}
	for _, t := range r.opts.Prefer {
		for i := range providers {
			if providers[i].Type.Name == t {
				out = append(out, &providers[i])
			}
		}
	}
	for _, p := range providers {
		if !slices.Contains(r.opts.Prefer, p.Type.Name) {
			noneErr.Reasons = append(noneErr.Reasons, &ProviderError{Provider: p.Name, Type: p.Type.Name,
				Err: fmt.Errorf("type not among the preferred %v", r.opts.Prefer)})
		}
	}
	return out
}

// build makes the config for a resolution; dial, when not nil, reaches the member through the
// Resolver's tunnel.
func (r *Resolver) build(key types.NamespacedName, server *url.URL, caData []byte, provider *v1alpha1.AuthProviderConfig, creds *Credentials,
	dial func(ctx context.Context, network, address string) (net.Conn, error)) (*Resolved, error) {
	unauthorized := &atomic.Bool{}
	pinned := pinTo(key.String(), server)
	cfg := &rest.Config{
		Host:            server.String(),
		UserAgent:       r.opts.UserAgent,
		QPS:             r.opts.QPS,
		Burst:           r.opts.Burst,
		BearerToken:     creds.BearerToken,
		BearerTokenFile: creds.TokenFile,
		ExecProvider:    creds.Exec,
		Dial:            dial,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:     caData,
			CertData:   creds.CertData,
			KeyData:    creds.KeyData,
			ServerName: creds.TLSServerName,
		},
		// Innermost, so that client-go's auth round trippers, which wrap it, cannot add a
		// credential to a request it has not checked: see pinned_transport.go.
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			watched := &unauthorizedWatcher{next: pinned(rt), unauthorized: unauthorized}
			if r.opts.MaxAnswerBytes > 0 {
				return answercap.WrapExceptWatches(r.opts.MaxAnswerBytes)(watched)
			}
			return watched
		},
	}
	if r.opts.InsecureSkipTLSVerify {
		cfg.Insecure, cfg.CAData = true, nil
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		// client-go's errors here describe the config's shape (no PEM data, a key that does not
		// match its certificate), never its content.
		return nil, fmt.Errorf("building a client: %w", err)
	}
	return &Resolved{
		Config:       cfg,
		HTTPClient:   httpClient,
		Server:       server,
		Provider:     provider.Name,
		ProviderType: provider.Type.Name,
		server:       server.String(),
		unauthorized: unauthorized,
		owner:        r,
	}, nil
}

// fingerprint digests every input behind a resolution, credentials included, so that a rotated
// Secret or file yields a new one. It is kept only as a digest.
func (r *Resolver) fingerprint(server *url.URL, caData []byte, p *v1alpha1.AuthProviderConfig, c *Credentials, t *v1alpha1.Tunnel) [sha256.Size]byte {
	h := sha256.New()
	agent := ""
	if t != nil {
		agent = "tunnel:" + t.Agent
	}
	for _, s := range []string{server.String(), p.Name, p.Type.Name, c.BearerToken, c.TokenFile, c.TLSServerName, c.Revision, agent} {
		writeField(h, []byte(s))
	}
	for _, b := range [][]byte{caData, c.CertData, c.KeyData} {
		writeField(h, b)
	}
	if c.Exec != nil {
		exec, _ := json.Marshal(c.Exec) // plain data; cannot fail
		writeField(h, exec)
		writeField(h, execClusterConfig(c.Exec)) // not in the JSON above
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// unauthorizedWatcher notes a 401 from the member, so that the next Resolve rereads the inputs.
type unauthorizedWatcher struct {
	next         http.RoundTripper
	unauthorized *atomic.Bool
}

func (w *unauthorizedWatcher) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		w.unauthorized.Store(true)
	}
	return resp, err
}

// WrappedRoundTripper lets client-go's debugging and cancellation see through the watcher.
func (w *unauthorizedWatcher) WrappedRoundTripper() http.RoundTripper { return w.next }
