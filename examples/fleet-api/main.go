// Command fleet-api answers "what runs where" for every member cluster of a registry, from watch
// caches on the members (package fleetcache) rather than a request per member per question: the
// seeds' Optikon /cluster API, as an example of the SDK's caches.
//
//	fleet-api -n fleet --listen 127.0.0.1:8080
//
//	GET    /clusters                    every member: Ready, reason, version, nodes (ready of
//	                                    total), Deployments (ready of total), and how current the
//	                                    member's caches are (Synced, or Stale since when and why)
//	GET    /clusters/{namespace}/{name} one member, with its nodes and Deployments
//	POST   /clusters                    register a Cluster (JSON), checked with ValidateCluster
//	DELETE /clusters/{namespace}/{name} remove a Cluster from the registry
//
// Errors are Kubernetes Status objects, as an API server writes them. The registry is reached with
// kubectl's connection flags (--kubeconfig, --context, -n, ...), the members with the credentials
// their Clusters point to, within the trust flags (--allow-exec, --file-root, ...). It listens on
// localhost by default: anyone who can reach it may register and remove Clusters with its
// credentials.
package main

import (
	"context"
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

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/trustflags"
)

type options struct {
	registry      *genericclioptions.ConfigFlags
	allNamespaces bool
	listen        string
	syncTimeout   time.Duration
	trust         trustflags.Flags
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
		Use:   "fleet-api [-n NAMESPACE | -A] [--listen ADDRESS] [flags]",
		Short: "Serve what runs on each member cluster of a registry, from watch caches",
		Example: `  # The members of the "fleet" cluster set, on localhost:8080
  fleet-api -n fleet
  curl localhost:8080/clusters`,
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
	fs.StringVar(&opts.listen, "listen", "127.0.0.1:8080", "address to serve on")
	fs.DurationVar(&opts.syncTimeout, "sync-timeout", 30*time.Second, "how long to wait for each member's caches before serving (members not synced then are shown as syncing)")
	trust.AddFlags(fs)
	if err := cmd.Execute(); err != nil {
		return nil, err
	}
	if help, _ := fs.GetBool("help"); help {
		return nil, pflag.ErrHelp
	}
	var err error
	if _, err = trust.ResolverOptions(); err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(opts.listen); err != nil {
		return nil, fmt.Errorf("--listen %q: %w", opts.listen, err)
	}
	if opts.syncTimeout <= 0 {
		return nil, fmt.Errorf("--sync-timeout %s: want a positive duration", opts.syncTimeout)
	}
	return opts, nil
}

func serve(ctx context.Context, opts *options, stdout io.Writer) error {
	config, err := opts.registry.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("reaching the registry: %w", err)
	}
	var namespaces []string
	if !opts.allNamespaces {
		ns, _, err := opts.registry.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return fmt.Errorf("reaching the registry: %w", err)
		}
		namespaces = []string{ns}
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
	fmt.Fprintf(stdout, "serving %d members on http://%s\n", s.fleet.Len(), listener.Addr())
	srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
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
