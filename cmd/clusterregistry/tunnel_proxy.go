package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/trustflags"
	"github.com/cluster-registry/sdk/tunnel"
)

// TunnelProxyOptions are tunnel-proxy's flags: Complete connects to the registry, Validate reads
// the tunnel's certificates, Run serves until interrupted.
type TunnelProxyOptions struct {
	Listen string
	Trust  trustflags.Flags

	proxy  *tunnel.Proxy
	stderr io.Writer
}

// Complete connects to the registry, where the proxy reads each Cluster it is asked for.
func (o *TunnelProxyOptions) Complete(f *factory, cmd *cobra.Command, _ []string) error {
	reg, err := f.Registry()
	if err != nil {
		return err
	}
	o.stderr = cmd.ErrOrStderr()
	o.proxy = &tunnel.Proxy{Cluster: func(ctx context.Context, namespace, name string) (*v1alpha1.Cluster, error) {
		return reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace).Get(ctx, name, metav1.GetOptions{})
	}}
	return nil
}

// Validate needs the tunnel flags, and a loopback address to listen on.
func (o *TunnelProxyOptions) Validate() error {
	dialer, err := o.Trust.TunnelDialer()
	if err != nil {
		return usageError{err}
	}
	if dialer == nil {
		return usageError{fmt.Errorf("--%s is required: the tunnel server's frontend the proxy dials members through", trustflags.FlagTunnelServer)}
	}
	o.proxy.Dialer = dialer
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return usageError{fmt.Errorf("--listen %q: want host:port", o.Listen)}
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		// Anyone who reaches it reaches the members' API servers with this reader's tunnel.
		return usageError{fmt.Errorf("--listen %q: the proxy listens on a loopback address only (127.0.0.1 or ::1)", o.Listen)}
	}
	return nil
}

// Run serves CONNECTs until ctx ends.
func (o *TunnelProxyOptions) Run(ctx context.Context) error {
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	server := &http.Server{Handler: o.proxy, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(o.stderr, "tunnel proxy: on %s\n", l.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdown)
	}()
	if err := server.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

var (
	tunnelProxyLong = `tunnel-proxy takes kubectl to members reached through a tunnel: a local HTTP CONNECT proxy that
opens each connection through the tunnel server (--tunnel-server and its certificates) to the
member's agent. export --format kubeconfig --tunnel-proxy=ADDRESS writes, for each tunnelled
member, a proxy-url that names its Cluster; kubectl's TLS to the member's API server then runs
end to end through the proxy and the tunnel, and its credentials come from clusterregistry
credential, as for every exported member. The proxy answers CONNECT for each Cluster's own API
server address only, sends no credential of its own, and listens on loopback only.`

	tunnelProxyExample = `  # Run the proxy, export a kubeconfig that uses it, and reach a tunnelled member with kubectl
  clusterregistry tunnel-proxy --listen=127.0.0.1:8118 --tunnel-server=tunnel.example.com:8090 \
    --tunnel-ca=frontend-ca.crt --tunnel-cert=reader.crt --tunnel-key=reader.key &
  clusterregistry export -n fleet --format kubeconfig --tunnel-proxy=127.0.0.1:8118 --tunnel-server=tunnel.example.com:8090 \
    --tunnel-ca=frontend-ca.crt --tunnel-cert=reader.crt --tunnel-key=reader.key > fleet.kubeconfig
  kubectl --kubeconfig fleet.kubeconfig --context edge-3 get nodes`
)

func newTunnelProxy(f *factory) *cobra.Command {
	o := &TunnelProxyOptions{}
	cmd := &cobra.Command{
		Use:     "tunnel-proxy --tunnel-server=HOST:PORT --tunnel-ca=FILE --tunnel-cert=FILE --tunnel-key=FILE [--listen=127.0.0.1:8118]",
		Short:   "Take kubectl to tunnelled members: a local proxy through the tunnel",
		Long:    tunnelProxyLong,
		Example: tunnelProxyExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    runOptions(f, o),
	}
	cmd.Flags().StringVar(&o.Listen, "listen", "127.0.0.1:8118", "the loopback address the proxy listens on (host:port)")
	o.Trust.AddTunnelFlags(cmd.Flags())
	return cmd
}
