// Package tunnel reaches members that the registry cannot dial: edge clusters behind NAT, whose
// tunnel agent dials out to a tunnel server beside the registry, and whose API server readers
// then dial through it.
//
// The engine is Kubernetes' own konnectivity (sigs.k8s.io/apiserver-network-proxy): its proxy
// server, its stock agent and its client library, the pieces kube-apiserver uses to reach nodes
// behind a firewall. Server runs konnectivity's proxy server with three guards that the stock one
// does not have:
//
//   - An agent speaks only for its own member. It authenticates with a bound ServiceAccount token
//     of the registry (TokenReview), and it must claim exactly the identity that ServiceAccount
//     gives it: access.TunnelHost(namespace, name). An agent claiming another's is refused, so
//     traffic for member B never reaches member A's agent.
//   - An agent dials only its member's API server. The destination is the ServiceAccount's
//     agent.DestinationAnnotation, written by whoever joined the member, never a reader's or a
//     Cluster's choice: the server rewrites every dial to it, and refuses a dial for another port.
//   - Only the registry's readers reach the frontend: it asks each caller for a client certificate
//     signed by the CA the server is given.
//
// Dialer is the reader's side, for access.ResolverOptions.Tunnel. TLS to the member's API server
// runs end to end over the connection it returns, so the tunnel server and the agent carry only
// ciphertext, and a rogue agent that answers for a member fails the handshake before any
// credential is sent.
package tunnel
