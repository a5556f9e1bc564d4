package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/apiserver-network-proxy/konnectivity-client/proto/client"
	anpserver "sigs.k8s.io/apiserver-network-proxy/pkg/server"
	"sigs.k8s.io/apiserver-network-proxy/pkg/server/proxystrategies"
	anpagent "sigs.k8s.io/apiserver-network-proxy/proto/agent"

	"github.com/cluster-registry/sdk/tunnel/agent"
)

// ServerOptions configures a Server.
type ServerOptions struct {
	// Registry authenticates agents (TokenReview), reads their ServiceAccounts'
	// agent.DestinationAnnotation, and asks whether a reader may read a cluster set
	// (SubjectAccessReview): it needs create on tokenreviews and subjectaccessreviews, and get on
	// serviceaccounts (in Namespace alone, when it is set).
	Registry kubernetes.Interface
	// Namespace, when set, is the one cluster set whose agents the server admits: an agent whose
	// ServiceAccount is of another namespace is refused before that ServiceAccount is read. Empty,
	// agents of every namespace are.
	Namespace string
	// Audience overrides agent.Audience, the audience agents' tokens are bound to.
	Audience string
	// FrontendTLS serves the readers' frontend. It must hold a serving certificate and ClientCAs,
	// the CA that signs the readers' client certificates: the server requires and verifies one.
	FrontendTLS *tls.Config
	// AnyReader lets every reader with a client certificate of FrontendTLS.ClientCAs reach every
	// member. Without it, a reader reaches the members of the cluster sets whose Clusters the
	// registry lets it get: the reader being who its certificate names (the common name its
	// user, the organizations its groups), as the registry's API server would read it.
	AnyReader bool
	// AgentTLS serves the agents. It must hold a serving certificate; agents authenticate with
	// their tokens.
	AgentTLS *tls.Config
	// ServerID names this server among ServerCount servers behind one address, for konnectivity's
	// agents, which connect to each. Defaults: a random ID, and 1.
	ServerID    string
	ServerCount int
	// AgentRecheck is how often a connected agent's token is reviewed again, beside once when it
	// expires: an agent whose ServiceAccount was deleted (unjoin), or whose token expired, is
	// disconnected then, and refused when it reconnects. Default a minute.
	AgentRecheck time.Duration
	// Logger receives the server's logs, which never hold tokens.
	Logger logr.Logger
}

// Server is a konnectivity proxy server that binds each agent to its ServiceAccount and bounds
// its destinations (see the package doc).
type Server struct {
	opts  ServerOptions
	proxy *anpserver.ProxyServer
	// readers answers whether a reader may reach a cluster set's members; nil with AnyReader.
	readers *readerGrants

	mu sync.RWMutex
	// connected counts the agent streams for each host an agent answers for (access.TunnelHost).
	connected map[string]int
}

// NewServer checks opts and returns a Server; Serve runs it.
func NewServer(opts ServerOptions) (*Server, error) {
	switch {
	case opts.Registry == nil:
		return nil, errors.New("tunnel server: Registry is required, to authenticate agents")
	case opts.FrontendTLS == nil || opts.FrontendTLS.ClientCAs == nil:
		return nil, errors.New("tunnel server: FrontendTLS with ClientCAs is required: the frontend admits only readers with a client certificate")
	case opts.AgentTLS == nil:
		return nil, errors.New("tunnel server: AgentTLS is required")
	}
	if opts.Audience == "" {
		opts.Audience = agent.Audience
	}
	if opts.ServerCount <= 0 {
		opts.ServerCount = 1
	}
	if opts.ServerID == "" {
		opts.ServerID = randomID()
	}
	if opts.AgentRecheck <= 0 {
		opts.AgentRecheck = time.Minute
	}
	frontend := opts.FrontendTLS.Clone()
	frontend.ClientAuth = tls.RequireAndVerifyClientCert
	opts.FrontendTLS = frontend
	// Agents authenticate in agentInterceptor, before konnectivity's handler sees the stream, so
	// its own check of one ServiceAccount for every agent stays off.
	proxy := anpserver.NewProxyServer(opts.ServerID, []proxystrategies.ProxyStrategy{proxystrategies.ProxyStrategyDestHost},
		opts.ServerCount, &anpserver.AgentTokenAuthenticationOptions{}, 10)
	s := &Server{opts: opts, proxy: proxy, connected: map[string]int{}}
	if !opts.AnyReader {
		s.readers = &readerGrants{s: s, answers: map[string]grant{}}
	}
	return s, nil
}

// Serve serves readers on frontend and agents on agents until ctx ends, then closes both and
// every tunnel through them.
func (s *Server) Serve(ctx context.Context, frontend, agents net.Listener) error {
	fs := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(s.opts.FrontendTLS)),
		grpc.StreamInterceptor(s.frontendInterceptor),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Hour}),
		// A Dialer's one connection carries all its tunnels, and pings to find a lost frontend.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: frontendKeepalive / 2}),
	)
	client.RegisterProxyServiceServer(fs, s.proxy)
	as := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(s.opts.AgentTLS)),
		grpc.StreamInterceptor(s.agentInterceptor),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Hour}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 30 * time.Second, PermitWithoutStream: true}),
	)
	anpagent.RegisterAgentServiceServer(as, s.proxy)

	// Either server's failure, or ctx's end, stops both. Tunnels are long-lived streams: a
	// graceful stop would wait for every one of them.
	stop := make(chan struct{})
	var once sync.Once
	stopBoth := func() { once.Do(func() { close(stop) }) }
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		fs.Stop()
		as.Stop()
	}()
	var g errgroup.Group
	g.Go(func() error { defer stopBoth(); return serveUntilStopped(fs, frontend, "frontend") })
	g.Go(func() error { defer stopBoth(); return serveUntilStopped(as, agents, "agents") })
	return g.Wait()
}

func serveUntilStopped(s *grpc.Server, l net.Listener, what string) error {
	if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("tunnel server's %s on %s: %w", what, l.Addr(), err)
	}
	return nil
}

// Connected reports whether an agent answering for host (access.TunnelHost) is connected to this
// server.
func (s *Server) Connected(host string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.connected[host] > 0
}

// agentConnected records an admitted agent's stream; the func it returns records its end.
func (s *Server) agentConnected(id *agentIdentity) (disconnected func()) {
	s.mu.Lock()
	s.connected[id.host]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.connected[id.host]--; s.connected[id.host] <= 0 {
			delete(s.connected, id.host)
		}
		s.mu.Unlock()
	}
}
