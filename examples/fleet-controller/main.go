package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/trustflags"
)

type options struct {
	registry      *genericclioptions.ConfigFlags
	allNamespaces bool
	metrics       string
	trust         trustflags.Flags
	// log is where the controller reports what it cannot fix, such as a second writer.
	log logr.Logger
	// skipNameValidation is for tests, which run the controller more than once in a process.
	skipNameValidation bool
}

func main() {
	ctrl.SetLogger(klog.Background())
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
		fmt.Fprintln(stderr, "fleet-controller:", err)
		fmt.Fprintln(stderr, "Run fleet-controller --help for the flags.")
		return 2
	}
	a, err := newApp(ctx, opts)
	if err == nil {
		fmt.Fprintln(stdout, "reconciling", membershipNamespace+"/"+membershipPrefix+"SET on every member")
		err = a.run(ctx)
	}
	if err != nil {
		fmt.Fprintln(stderr, "fleet-controller:", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stdout io.Writer) (*options, error) {
	opts := &options{registry: genericclioptions.NewConfigFlags(true), log: ctrl.Log.WithName("membership")}
	trust := &opts.trust
	cmd := &cobra.Command{
		Use:   "fleet-controller [-n NAMESPACE | -A] [flags]",
		Short: "Keep a ConfigMap that names its registry entry on every member cluster",
		Example: `  # Every member of the "fleet" cluster set
  fleet-controller -n fleet
  kubectl --context member-1 get configmap -n kube-public cluster-registry-membership-fleet -o yaml`,
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
	fs.StringVar(&opts.metrics, "metrics-bind-address", "0", `address to serve metrics on ("0": none)`)
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
	return opts, nil
}

// app is the controller's parts: the Fleet it follows, the Provider that engages its members,
// and the multicluster manager that runs the controller on them.
type app struct {
	fleet    *multicluster.Fleet
	provider *mcprovider.Provider
	mgr      mcmanager.Manager
}

func newApp(ctx context.Context, opts *options) (*app, error) {
	config, err := opts.registry.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reaching the registry: %w", err)
	}
	var namespaces []string
	if !opts.allNamespaces {
		ns, _, err := opts.registry.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return nil, fmt.Errorf("reaching the registry: %w", err)
		}
		namespaces = []string{ns}
	}
	registry, err := versioned.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	// Credentials are read from the registry with the controller's own permissions.
	resolver, err := opts.trust.ToResolver(kube, "fleet-controller")
	if err != nil {
		return nil, err
	}
	a := &app{fleet: multicluster.NewFleet(registry, resolver, multicluster.FleetOptions{Namespaces: namespaces})}
	// The kinds the controller watches, synced on each member before it is engaged: see
	// mcprovider.Options.WarmKinds.
	a.provider = mcprovider.New(a.fleet, mcprovider.Options{WarmKinds: []client.Object{&corev1.ConfigMap{}, &corev1.Namespace{}}})
	a.mgr, err = mcmanager.New(config, a.provider, manager.Options{
		Metrics: metricsserver.Options{BindAddress: opts.metrics},
		// A process runs one manager, but tests start several in turn, whose controllers'
		// names would otherwise clash in controller-runtime's process-wide registry.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(opts.skipNameValidation)},
	})
	if err != nil {
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	if err := setUpMembership(a.mgr, a.fleet, opts.log); err != nil {
		return nil, err
	}
	return a, nil
}

// run follows the registry and reconciles on its members until ctx is done.
func (a *app) run(ctx context.Context) error {
	if err := a.fleet.Start(ctx); err != nil {
		return err
	}
	defer a.fleet.Stop()
	return a.mgr.Start(ctx) // which starts the provider
}
