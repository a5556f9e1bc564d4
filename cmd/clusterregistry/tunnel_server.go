package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cluster-registry/sdk/tunnel"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// TunnelServerOptions are tunnel-server's flags: Complete connects to the registry, Validate checks
// the flags and reads the certificates, Run serves until interrupted.
type TunnelServerOptions struct {
	FrontendAddress, AgentAddress string
	// The frontend's serving certificate, and the CA of the readers' client certificates.
	FrontendCert, FrontendKey, ReaderCA string
	// The agents' side's serving certificate.
	AgentCert, AgentKey string
	Audience            string
	AnyReader           bool
	ServerID            string
	ServerCount         int
	AgentRecheck        time.Duration
	// AllNamespaces admits the agents of every cluster set; without it, those of -n's (or the
	// kubeconfig context's) alone.
	AllNamespaces bool
	Verbose       bool

	opts   tunnel.ServerOptions
	stderr io.Writer
}

// Complete connects to the registry, which authenticates the agents, and refuses a cluster set
// it does not have.
func (o *TunnelServerOptions) Complete(f *factory, cmd *cobra.Command, _ []string) error {
	reg, err := f.Registry()
	if err != nil {
		return err
	}
	o.stderr = cmd.ErrOrStderr()
	o.opts = tunnel.ServerOptions{Registry: reg.Kube, Audience: o.Audience, AnyReader: o.AnyReader, ServerID: o.ServerID, ServerCount: o.ServerCount,
		AgentRecheck: o.AgentRecheck, Logger: commandLogger(o.stderr, o.Verbose).WithName("tunnel")}
	if !o.AllNamespaces {
		if err := reg.ClusterSetExists(cmd.Context(), reg.Namespace); err != nil {
			return err
		}
		o.opts.Namespace = reg.Namespace
	}
	return nil
}

// Validate checks that every certificate is given, and reads them.
func (o *TunnelServerOptions) Validate() error {
	var errs []error
	for _, f := range []struct{ name, value string }{
		{"frontend-cert", o.FrontendCert}, {"frontend-key", o.FrontendKey}, {"reader-ca", o.ReaderCA},
		{"agent-cert", o.AgentCert}, {"agent-key", o.AgentKey},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("--%s is required", f.name))
		}
	}
	if o.AgentRecheck <= 0 {
		errs = append(errs, fmt.Errorf("--agent-recheck %s: want a positive duration, such as 1m", o.AgentRecheck))
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	frontend, err := tls.LoadX509KeyPair(o.FrontendCert, o.FrontendKey)
	if err != nil {
		return fmt.Errorf("--frontend-cert and --frontend-key: %w", err)
	}
	agents, err := tls.LoadX509KeyPair(o.AgentCert, o.AgentKey)
	if err != nil {
		return fmt.Errorf("--agent-cert and --agent-key: %w", err)
	}
	caPEM, err := os.ReadFile(o.ReaderCA)
	if err != nil {
		return fmt.Errorf("--reader-ca: %w", err)
	}
	readers := x509.NewCertPool()
	if !readers.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("--reader-ca %s: no PEM certificate in it", o.ReaderCA)
	}
	o.opts.FrontendTLS = &tls.Config{Certificates: []tls.Certificate{frontend}, ClientCAs: readers, MinVersion: tls.VersionTLS12}
	o.opts.AgentTLS = &tls.Config{Certificates: []tls.Certificate{agents}, MinVersion: tls.VersionTLS12}
	return nil
}

// Run serves readers and agents until ctx ends.
func (o *TunnelServerOptions) Run(ctx context.Context) error {
	server, err := tunnel.NewServer(o.opts)
	if err != nil {
		return err
	}
	frontend, err := net.Listen("tcp", o.FrontendAddress)
	if err != nil {
		return fmt.Errorf("--frontend-address: %w", err)
	}
	agents, err := net.Listen("tcp", o.AgentAddress)
	if err != nil {
		frontend.Close()
		return fmt.Errorf("--agent-address: %w", err)
	}
	fmt.Fprintf(o.stderr, "tunnel server: readers on %s, agents on %s\n", frontend.Addr(), agents.Addr())
	return server.Serve(ctx, frontend, agents)
}

var (
	tunnelServerLong = `tunnel-server runs the tunnel that members behind NAT dial out to: Kubernetes' own konnectivity
proxy server, with three guards of its own (docs/tunnel.md).

Agents connect on --agent-address with a bound token of a ServiceAccount of the registry, for
the audience --audience. An agent speaks only for its own ServiceAccount: it must claim the
identity that ServiceAccount gives it, and every dial sent to it goes to the destination the
ServiceAccount's tunnel.clusterregistry.k8s.io/destination annotation names, its member's API
server. Readers (controllers, fleet-api, this command's --tunnel-server) connect on
--frontend-address with a client certificate that --reader-ca signs, and dial a member by its
Cluster's spec.kubernetesApiEndpoints.tunnel.agent, and only the members of the cluster sets
whose Clusters the registry lets them get: a reader is who its certificate names (the common
name its user, the organizations its groups), as the registry's API server would read it
(--any-reader lets every reader with a certificate reach every member). TLS to the member's API
server runs end to end through the tunnel: the server and the agent carry ciphertext only.

The server admits the agents of one cluster set, -n's (or the kubeconfig context's), or with -A
those of every set. The registry's credentials (--kubeconfig) need create on tokenreviews and
subjectaccessreviews, and get on serviceaccounts in that set (or every namespace, with -A):
deploy/tunnel/clusterrole.yaml.`

	tunnelServerExample = `  # Beside the registry, for cluster set edge, with certificates of the operator's CA:
  clusterregistry tunnel-server -n edge --frontend-address=:8090 --agent-address=:8091 \
    --frontend-cert=frontend.crt --frontend-key=frontend.key --reader-ca=readers-ca.crt \
    --agent-cert=agents.crt --agent-key=agents.key

  # A reader then reaches tunnelled members with:
  clusterregistry health --tunnel-server=tunnel.example.com:8090 --tunnel-ca=frontend-ca.crt \
    --tunnel-cert=reader.crt --tunnel-key=reader.key`
)

func newTunnelServer(f *factory) *cobra.Command {
	o := &TunnelServerOptions{}
	cmd := &cobra.Command{
		Use:     "tunnel-server --frontend-cert=FILE --frontend-key=FILE --reader-ca=FILE --agent-cert=FILE --agent-key=FILE",
		Short:   "Run the tunnel server that members behind NAT dial out to",
		Long:    tunnelServerLong,
		Example: tunnelServerExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    runOptions(f, o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.FrontendAddress, "frontend-address", ":8090", "where readers connect (host:port)")
	fl.StringVar(&o.AgentAddress, "agent-address", ":8091", "where agents connect (host:port)")
	fl.StringVar(&o.FrontendCert, "frontend-cert", "", "the frontend's serving certificate")
	fl.StringVar(&o.FrontendKey, "frontend-key", "", "the key of --frontend-cert")
	fl.StringVar(&o.ReaderCA, "reader-ca", "", "the CA that signs the readers' client certificates; readers without one are refused")
	fl.StringVar(&o.AgentCert, "agent-cert", "", "the agents' side's serving certificate, which agents verify with their --ca-cert")
	fl.StringVar(&o.AgentKey, "agent-key", "", "the key of --agent-cert")
	fl.StringVar(&o.Audience, "audience", agent.Audience, "the audience agents' tokens must be bound to")
	fl.BoolVar(&o.AnyReader, "any-reader", false, "let every reader with a certificate of --reader-ca reach every member, not only those of the cluster sets the registry lets it read")
	fl.StringVar(&o.ServerID, "server-id", "", "this server's ID among --server-count servers behind one address (default: random)")
	fl.IntVar(&o.ServerCount, "server-count", 1, "how many tunnel servers run behind one address; agents connect to each")
	fl.DurationVar(&o.AgentRecheck, "agent-recheck", time.Minute, "how often a connected agent's token is reviewed again (and when it expires): an agent whose ServiceAccount is gone (unjoin) or whose token expired is disconnected")
	fl.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "admit the agents of every namespace (cluster set), not only -n's")
	fl.BoolVarP(&o.Verbose, "verbose", "v", false, "log each agent that connects")
	return cmd
}
