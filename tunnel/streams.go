package tunnel

import (
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/apiserver-network-proxy/konnectivity-client/proto/client"

	"github.com/cluster-registry/sdk/access"
)

// refusedAddress is what an agent is told to dial when a dial for another destination than its
// own reaches it: a name that resolves nowhere, so its dial fails and the reader is told.
const refusedAddress = "refused-by-the-tunnel-server.invalid:1"

// agentStream rewrites every dial sent to an agent to its destination: the name a reader dials
// only chose the agent.
type agentStream struct {
	grpc.ServerStream
	id *agentIdentity
}

func (a *agentStream) SendMsg(m any) error {
	pkt, ok := m.(*client.Packet)
	if !ok || pkt.Type != client.PacketType_DIAL_REQ {
		return a.ServerStream.SendMsg(m)
	}
	out := proto.Clone(pkt).(*client.Packet)
	req := out.GetDialRequest()
	req.Address = refusedAddress
	if host, port, err := net.SplitHostPort(pkt.GetDialRequest().GetAddress()); err == nil && host == a.id.host && port == access.TunnelPort {
		req.Address = a.id.destination
	}
	return a.ServerStream.SendMsg(out)
}

// frontendInterceptor refuses, before konnectivity sees it, a reader's dial for anything but an
// agent's name and its destination's port, and, unless ServerOptions.AnyReader, for a member of a
// cluster set whose Clusters the reader may not get in the registry. The frontend's TLS config
// has already verified the reader's client certificate.
func (s *Server) frontendInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &frontendStream{ServerStream: ss, s: s})
}

type frontendStream struct {
	grpc.ServerStream
	s *Server
	// send serializes sends: konnectivity's own, and a refusal sent from RecvMsg.
	send sync.Mutex
}

func (f *frontendStream) SendMsg(m any) error {
	f.send.Lock()
	defer f.send.Unlock()
	return f.ServerStream.SendMsg(m)
}

func (f *frontendStream) RecvMsg(m any) error {
	if err := f.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	pkt, ok := m.(*client.Packet)
	if !ok || pkt.Type != client.PacketType_DIAL_REQ {
		return nil
	}
	req := pkt.GetDialRequest()
	reason := f.s.refusal(req.GetAddress())
	if reason == "" && f.s.readers != nil {
		host, _, _ := net.SplitHostPort(req.GetAddress())
		reason = f.s.readers.check(f.Context(), host)
	}
	if reason == "" {
		return nil
	}
	f.s.opts.Logger.Info("refused a dial through the tunnel", "address", req.GetAddress(), "reason", reason)
	_ = f.SendMsg(&client.Packet{
		Type:    client.PacketType_DIAL_RSP,
		Payload: &client.Packet_DialResponse{DialResponse: &client.DialResponse{Random: req.GetRandom(), Error: reason}},
	})
	return status.Error(codes.PermissionDenied, reason)
}

// refusal says why a reader may not dial address, or "" if it may.
func (s *Server) refusal(address string) string {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "the tunnel dials host:port addresses only"
	}
	if !isAgentHost(host) {
		return "the tunnel reaches members' API servers only, by their agents' names (access.TunnelHost)"
	}
	if port != access.TunnelPort {
		return "the agent " + host + " reaches its member's API server only, at port " + access.TunnelPort + " of its name"
	}
	return ""
}

func isAgentHost(host string) bool {
	n := len(host) - len(access.TunnelHostSuffix)
	return n > 0 && host[n:] == access.TunnelHostSuffix
}
