package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/optikon"
	"github.com/cluster-registry/sdk/trustflags"
)

type options struct {
	registry      *genericclioptions.ConfigFlags
	allNamespaces bool
	optikonSet    string
	listen        string
	syncTimeout   time.Duration
	trust         trustflags.Flags
	// TLS: a certificate and key, or one made at start; callers' client certificates by clientCA.
	certFile, keyFile, clientCAFile string
	selfSigned                      bool
	allowedHosts                    []string
	// corsOrigins are the origins whose pages may call the API from a browser.
	corsOrigins []string
	// selfSignedFile holds the certificate --self-signed made, removed when serving ends.
	selfSignedFile string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = (&guard{}).allowOrigins(opts.corsOrigins) // refused before anything starts
	}
	if err != nil {
		fmt.Fprintln(stderr, "fleet-api:", err)
		fmt.Fprintln(stderr, "Run fleet-api --help for the flags.")
		return 2
	}
	if err := serve(ctx, opts, stdout); err != nil {
		fmt.Fprintln(stderr, "fleet-api:", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stdout io.Writer) (*options, error) {
	opts := &options{registry: genericclioptions.NewConfigFlags(true)}
	trust := &opts.trust
	cmd := &cobra.Command{
		Use:           "fleet-api [-n NAMESPACE | -A] [--listen ADDRESS] [flags]",
		Short:         "Serve what runs on each member cluster of a registry, from watch caches",
		Long:          longHelp,
		Example:       exampleHelp,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(*cobra.Command, []string) error { return nil },
	}
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	fs := cmd.Flags()
	opts.registry.AddFlags(fs)
	fs.BoolVarP(&opts.allNamespaces, "all-namespaces", "A", false, "every cluster set of the registry")
	fs.StringVar(&opts.optikonSet, "optikon-cluster-set", "", "the cluster set Optikon's API (/v0) serves, which names a cluster by its name alone: with -A, required for /v0; with -n, that set (the default)")
	fs.StringVar(&opts.listen, "listen", "127.0.0.1:8080", "address to serve on")
	fs.StringVar(&opts.certFile, "tls-cert-file", "", "serve TLS with this certificate (PEM), and --tls-private-key-file's key")
	fs.StringVar(&opts.keyFile, "tls-private-key-file", "", "the key of --tls-cert-file")
	fs.BoolVar(&opts.selfSigned, "self-signed", false, "serve TLS with a certificate made at start for the listen address and localhost, for local use; its path is printed")
	fs.StringVar(&opts.clientCAFile, "client-ca-file", "", "with TLS: callers may also authenticate with a client certificate that these CAs (PEM) signed, as the registry's x509 authentication reads it")
	fs.StringSliceVar(&opts.allowedHosts, "allowed-host", nil, "host names (or host:port) that callers may reach this server by, besides its listen address (and localhost on loopback); other Host headers are refused")
	fs.StringArrayVar(&opts.corsOrigins, "cors-allowed-origin", nil, "an origin (scheme://host:port) whose pages may call the API from a browser, as Optikon's UI served apart from it does: preflights are answered and answers are readable there (with credentials, so never *). Repeatable")
	fs.DurationVar(&opts.syncTimeout, "sync-timeout", 30*time.Second, "how long to wait for each member's caches before serving (members not synced then are shown as syncing)")
	trust.AddFlags(fs)
	if err := cmd.Execute(); err != nil {
		return nil, err
	}
	if help, _ := fs.GetBool("help"); help {
		return nil, pflag.ErrHelp
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return opts, nil
}

// validate checks the flags together: TLS, the listen address and the trust flags.
func (o *options) validate() error {
	if _, err := o.trust.ResolverOptions(); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", o.listen, err)
	}
	switch {
	case (o.certFile == "") != (o.keyFile == ""):
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	case o.selfSigned && o.certFile != "":
		return errors.New("--self-signed and --tls-cert-file conflict: choose one certificate")
	case !o.tls() && o.clientCAFile != "":
		return errors.New("--client-ca-file needs TLS: give --tls-cert-file and --tls-private-key-file, or --self-signed")
	case !o.tls() && !loopback(host):
		return fmt.Errorf("--listen %q: without TLS, only a loopback address (127.0.0.1, ::1, localhost), since tokens would cross the network in the clear; "+
			"give --tls-cert-file and --tls-private-key-file, or --self-signed", o.listen)
	}
	if ns := ptr.Deref(o.registry.Namespace, ""); ns != "" && !o.allNamespaces && o.optikonSet != "" && o.optikonSet != ns {
		return fmt.Errorf("--optikon-cluster-set %s: this server serves cluster set %s alone (-n); give the same set, or -A", o.optikonSet, ns)
	}
	if o.syncTimeout <= 0 {
		return fmt.Errorf("--sync-timeout %s: want a positive duration", o.syncTimeout)
	}
	return nil
}

var longHelp = `fleet-api serves what runs on each member cluster of a registry, from watch caches of every
member's Nodes, Pods and Deployments, and a dashboard at /. Every request acts for its caller: a bearer
token (or, with TLS and --client-ca-file, a client certificate) that the registry accepts, and
only what the registry's RBAC lets the caller do there.

` + httpapi.Help(apiRoutes) + `

Optikon's v0 API (its swagger; -n's cluster set, or --optikon-cluster-set's; errors are {"code", "message"}):
` + httpapi.Help(optikon.Routes) + `

Writes are checked (RBAC, then the Cluster's validation, naming each bad field) and sent to the
registry as the caller. Errors are Kubernetes Status objects, 404 and 405 included; a body that
is not JSON is 415. Without TLS it serves only on a loopback address.`

const exampleHelp = `  # The members of the "fleet" cluster set, on localhost:8080; callers send a token of theirs
  fleet-api -n fleet
  curl -H "Authorization: Bearer $(kubectl create token my-account -n fleet)" localhost:8080/clusters

  # Register a Cluster as yourself (RBAC: create clusters in the set)
  curl -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d @cluster.json localhost:8080/clusters

  # Change a member's labels, and remove one
  curl -X PATCH -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/merge-patch+json' \
    -d '{"metadata":{"labels":{"env":"prod"}}}' localhost:8080/clusters/fleet/member-1
  curl -X DELETE -H "Authorization: Bearer $TOKEN" localhost:8080/clusters/fleet/member-2

  # Release a chart on the members a Placement chooses, then move it to 1.3.0 (RBAC: releases)
  curl -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' localhost:8080/charts \
    -d '{"namespace":"fleet","name":"shop","placement":"web","chart":{"url":"oci://registry.example.com/charts/shop","version":"~1.2"}}'
  curl -X PATCH -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"version":"1.3.0"}' localhost:8080/charts/fleet/shop

  # Serve other machines: TLS, with a certificate for the name they use
  fleet-api -A --listen :8443 --tls-cert-file tls.crt --tls-private-key-file tls.key --allowed-host fleet.example.com`

// clusterSets are the cluster sets served: -n's (the kubeconfig's), or every one (nil) with -A;
// --optikon-cluster-set must be among them.
func (o *options) clusterSets() ([]string, error) {
	if o.allNamespaces {
		return nil, nil
	}
	ns, _, err := o.registry.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("reaching the registry: %w", err)
	}
	if o.optikonSet != "" && o.optikonSet != ns {
		return nil, fmt.Errorf("--optikon-cluster-set %s: this server serves cluster set %s alone (-n); give the same set, or -A", o.optikonSet, ns)
	}
	return []string{ns}, nil
}

func serve(ctx context.Context, opts *options, stdout io.Writer) error {
	config, err := opts.registry.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("reaching the registry: %w", err)
	}
	namespaces, err := opts.clusterSets()
	if err != nil {
		return err
	}
	registry, err := versioned.NewForConfig(config)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	// Credentials are read from the registry with the caller's own permissions.
	resolver, err := opts.trust.ToResolver(kube, "fleet-api")
	if err != nil {
		return err
	}
	s, err := startServer(ctx, registry, resolver, namespaces)
	if err != nil {
		return err
	}
	defer s.stop()
	s.optikonSet = opts.optikonSet
	// Serve once the members have synced, or have had their time: a dead member shows as syncing.
	for _, kind := range []interface {
		WaitForCacheSync(context.Context, time.Duration) error
	}{s.nodes, s.deployments} {
		if err := kind.WaitForCacheSync(ctx, opts.syncTimeout); err != nil {
			fmt.Fprintln(stdout, "not synced yet:", strings.TrimSpace(err.Error()))
		}
	}

	listener, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return err
	}
	var clientCA []byte
	if opts.clientCAFile != "" {
		if clientCA, err = os.ReadFile(opts.clientCAFile); err != nil {
			return fmt.Errorf("--client-ca-file: %w", err)
		}
	}
	g, err := opts.guard(config, clientCA, listener.Addr())
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.routes(g), ReadHeaderTimeout: 10 * time.Second}
	scheme := "http"
	if opts.tls() {
		scheme = "https"
		srv.TLSConfig, err = opts.tlsConfig(listener.Addr(), clientCA, stdout)
		if opts.selfSignedFile != "" {
			defer os.Remove(opts.selfSignedFile)
		}
		if err != nil {
			return err
		}
		listener = tls.NewListener(listener, srv.TLSConfig)
	}
	fmt.Fprintf(stdout, "serving %d members on %s://%s\n", s.fleet.Len(), scheme, listener.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// guard is the server's guard, serving on addr: the host names and origins its callers may use.
func (o *options) guard(config *rest.Config, clientCA []byte, addr net.Addr) (*guard, error) {
	g, err := newGuard(config, clientCA, servedHosts(addr, o.allowedHosts))
	if err != nil {
		return nil, err
	}
	return g, g.allowOrigins(o.corsOrigins)
}

func (o *options) tls() bool { return o.certFile != "" || o.selfSigned }

// loopback reports whether host names this machine alone.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsConfig is the server's TLS: its certificate (made now with --self-signed, written to a file
// whose path is printed so that clients may trust it), and callers' client certificates, asked
// for but not required, verified by the authenticator against clientCA.
func (o *options) tlsConfig(addr net.Addr, clientCA []byte, stdout io.Writer) (*tls.Config, error) {
	var certPEM, keyPEM []byte
	if o.selfSigned {
		host, _, _ := net.SplitHostPort(addr.String())
		ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			ips = append(ips, ip)
		}
		var err error
		if certPEM, keyPEM, err = cert.GenerateSelfSignedCertKey("localhost", ips, o.allowedHosts); err != nil {
			return nil, fmt.Errorf("--self-signed: %w", err)
		}
		f, err := os.CreateTemp("", "fleet-api-*.crt")
		if err != nil {
			return nil, fmt.Errorf("--self-signed: %w", err)
		}
		o.selfSignedFile = f.Name()
		if _, err := f.Write(certPEM); err != nil {
			f.Close()
			return nil, fmt.Errorf("--self-signed: %w", err)
		}
		f.Close()
		fmt.Fprintf(stdout, "self-signed certificate (trust it in clients, e.g. curl --cacert): %s\n", f.Name())
	} else {
		var err error
		if certPEM, err = os.ReadFile(o.certFile); err != nil {
			return nil, fmt.Errorf("--tls-cert-file: %w", err)
		}
		if keyPEM, err = os.ReadFile(o.keyFile); err != nil {
			return nil, fmt.Errorf("--tls-private-key-file: %w", err)
		}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the serving certificate and key: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if len(clientCA) > 0 {
		// The authenticator verifies the chain; the handshake only asks for a certificate.
		c.ClientAuth = tls.RequestClientCert
	}
	return c, nil
}
