package tunnel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/apiserver-network-proxy/proto/header"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// agentIdentity is who an agent is, as its token says, and what that lets it claim and dial.
type agentIdentity struct {
	namespace, name string
	// host is the one name it may answer for: access.TunnelHost(namespace, name).
	host string
	// destination is where it dials, from its ServiceAccount's DestinationAnnotation.
	destination string
}

// agentInterceptor admits an agent's stream only once its token says which ServiceAccount it is,
// and it claims that ServiceAccount's identity and nothing else. Stock konnectivity admits every
// agent of one ServiceAccount under whatever identifiers it claims.
//
// An admitted agent stays admitted only while its token does: see revoked.
func (s *Server) agentInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	id, token, err := s.authenticate(ss.Context())
	if err != nil {
		s.opts.Logger.Info("refused a tunnel agent", "reason", err.Error())
		return err
	}
	defer s.agentConnected(id)()
	s.opts.Logger.V(1).Info("tunnel agent connected", "serviceAccount", id.namespace+"/"+id.name, "destination", id.destination)
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- handler(srv, &agentStream{ServerStream: ss, id: id}) }()
	select {
	case err := <-served:
		return err
	case err := <-s.revoked(ctx, token, id):
		// Returning ends the stream: konnectivity's handler, reading it, sees it closed and
		// returns too, and the agent's reconnection is refused.
		s.opts.Logger.Info("disconnected a tunnel agent", "serviceAccount", id.namespace+"/"+id.name, "reason", err.Error())
		return err
	}
}

// authenticate reviews the agent's token and returns who it is, and the token, for revoked.
func (s *Server) authenticate(ctx context.Context) (*agentIdentity, string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	token, ok := bearer(md.Get(header.AuthenticationTokenContextKey))
	if !ok {
		return nil, "", status.Error(codes.Unauthenticated, "tunnel agent sent no bearer token: give it a bound ServiceAccount token of the registry (--service-account-token-path)")
	}
	id, err := s.identify(ctx, md, token)
	return id, token, err
}

func (s *Server) identify(ctx context.Context, md metadata.MD, token string) (*agentIdentity, error) {
	id, err := s.review(ctx, token)
	if err != nil {
		return nil, err
	}
	if s.opts.Namespace != "" && id.namespace != s.opts.Namespace {
		return nil, status.Errorf(codes.PermissionDenied, "tunnel agent's ServiceAccount %s/%s is not of cluster set %s, the one this tunnel server serves", id.namespace, id.name, s.opts.Namespace)
	}
	if err := claims(md, id.host); err != nil {
		return nil, err
	}
	sa, err := s.opts.Registry.CoreV1().ServiceAccounts(id.namespace).Get(ctx, id.name, metav1.GetOptions{})
	if err != nil {
		return nil, status.Errorf(codes.PermissionDenied, "tunnel agent's ServiceAccount %s/%s: %v", id.namespace, id.name, err)
	}
	dest := sa.Annotations[agent.DestinationAnnotation]
	if err := validDestination(dest); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "ServiceAccount %s/%s: annotation %s: %v", id.namespace, id.name, agent.DestinationAnnotation, err)
	}
	id.destination = dest
	return id, nil
}

func bearer(values []string) (string, bool) {
	if len(values) != 1 || !strings.HasPrefix(values[0], header.AuthenticationTokenContextSchemePrefix) {
		return "", false
	}
	t := strings.TrimPrefix(values[0], header.AuthenticationTokenContextSchemePrefix)
	return t, t != ""
}

// review asks the registry whose token it is. Its errors never repeat the token.
func (s *Server) review(ctx context.Context, token string) (*agentIdentity, error) {
	tr, err := s.opts.Registry.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{s.opts.Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "reviewing a tunnel agent's token: %v", err)
	}
	if !tr.Status.Authenticated {
		return nil, status.Errorf(codes.Unauthenticated, "tunnel agent's token is not valid for audience %q", s.opts.Audience)
	}
	parts := strings.Split(tr.Status.User.Username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return nil, status.Errorf(codes.PermissionDenied, "tunnel agent authenticated as %q, not as a ServiceAccount", tr.Status.User.Username)
	}
	return &agentIdentity{namespace: parts[2], name: parts[3], host: access.TunnelHost(parts[2], parts[3])}, nil
}

// claims checks that the agent claims its own identity only: its agent ID, and one identifier,
// host=, both its ServiceAccount's TunnelHost. konnectivity routes a dial to the agent whose host
// identifier is the dial's host, so this is what keeps one member's traffic from another's agent.
func claims(md metadata.MD, host string) error {
	ids := md.Get(header.AgentID)
	if len(ids) != 1 || ids[0] != host {
		return status.Errorf(codes.PermissionDenied, "tunnel agent of %s claims agent ID %q: it must be --agent-id=%s", host, ids, host)
	}
	raw := md.Get(header.AgentIdentifiers)
	want := url.Values{"host": {host}}
	if len(raw) != 1 {
		return status.Errorf(codes.PermissionDenied, "tunnel agent of %s must claim --agent-identifiers=%s", host, want.Encode())
	}
	got, err := url.ParseQuery(raw[0])
	if err != nil || got.Encode() != want.Encode() {
		return status.Errorf(codes.PermissionDenied, "tunnel agent of %s claims identifiers %q: it may claim only %s", host, raw[0], want.Encode())
	}
	return nil
}

func validDestination(dest string) error {
	if dest == "" {
		return fmt.Errorf("missing: it says where in the member's network the agent dials, as host:port (clusterregistry join --tunnel writes it)")
	}
	host, port, err := net.SplitHostPort(dest)
	if err != nil {
		return fmt.Errorf("%q is not host:port", dest)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port must be 1-65535", dest)
	}
	if net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(host)) > 0 {
		return fmt.Errorf("%q: host must be an IP address or a DNS name", dest)
	}
	return nil
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
