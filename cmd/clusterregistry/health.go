package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/trustflags"
)

func newHealth(fac *factory) *cobra.Command {
	var (
		opts                       health.Options
		allNamespaces, leaderElect bool
		selector, metricsAddr      string
		trust                      trustflags.Flags
		leaseNamespace, leaseName  string
		verbose                    bool
	)
	cmd := &cobra.Command{
		Use:   "health [-n NAMESPACE | -A] [-l SELECTOR]",
		Short: "Probe every member and keep each Cluster's status true",
		Long: `health probes the API server of every Cluster it selects, with the credentials a tool would use,
and writes the Cluster's status: the Ready condition (reasons Reachable, Unreachable, NotReady,
Unauthorized, CredentialsUnavailable, NoEndpoint, IdentityChanged, NotProbed), the member's
version, its identity (status.clusterID, the kube-system namespace's UID) and the last probe's
time. A state must persist for --failure-threshold (or --success-threshold) probes before Ready
changes; at steady state the only writes are one heartbeat per Cluster per --heartbeat.

It needs the ClusterRole in deploy/health/clusterrole.yaml in each namespace it watches. With
--leader-elect, replicas share the work of one: only the holder of a Lease probes and writes.`,
		Example: `  # The "fleet" cluster set of the current context's registry
  clusterregistry health -n fleet

  # Every cluster set, production members only, two replicas taking turns
  clusterregistry health -A -l env=prod --leader-elect --leader-elect-namespace cluster-registry

  # Members that authenticate with a projected token file of this pod's
  clusterregistry health -n fleet --file-root /var/run/secrets/tokens --send-to https://prod-eu-1.example.com:6443`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The library takes 0 for its default; a flag of 0 or less is a mistake, named as the flag.
			for _, d := range []struct {
				flag  string
				value time.Duration
			}{{"interval", opts.Interval}, {"probe-timeout", opts.Timeout}, {"heartbeat", opts.Heartbeat}} {
				if d.value <= 0 {
					return usageError{fmt.Errorf("--%s %s: want a positive duration", d.flag, d.value)}
				}
			}
			for _, n := range []struct {
				flag  string
				value int
			}{{"concurrency", opts.Concurrency}, {"failure-threshold", opts.FailureThreshold}, {"success-threshold", opts.SuccessThreshold}} {
				if n.value < 1 {
					return usageError{fmt.Errorf("--%s %d: want 1 or more", n.flag, n.value)}
				}
			}
			reg, err := fac.Registry()
			if err != nil {
				return err
			}
			if !allNamespaces {
				opts.Namespaces = []string{reg.Namespace}
			}
			if opts.Selector, err = labels.Parse(selector); err != nil {
				return usageError{fmt.Errorf("-l/--selector: %w", err)}
			}
			resolverOpts, err := trust.ResolverOptions()
			if err != nil {
				return usageError{err}
			}
			resolverOpts.Secrets = multicluster.SecretsFromClient(reg.Kube)
			resolverOpts.UserAgent = "clusterregistry-health"
			if opts.Resolver, err = multicluster.NewResolver(resolverOpts); err != nil {
				return err
			}
			opts.Kube, opts.Registry = reg.Kube, reg.Clusters
			if leaderElect {
				if leaseNamespace == "" {
					leaseNamespace = opts.Namespaces[0] // with -A, the flag is required below
				}
				opts.LeaderElection = &health.LeaderElection{Namespace: leaseNamespace, Name: leaseName}
			}
			level := 0
			if verbose {
				level = 1
			}
			opts.Logger = funcr.New(func(prefix, args string) { fmt.Fprintln(cmd.ErrOrStderr(), prefix, args) }, funcr.Options{Verbosity: level, LogTimestamp: true})
			if metricsAddr != "" {
				reg := prometheus.NewRegistry()
				opts.Metrics = reg
				go serveMetrics(metricsAddr, reg, opts.Logger)
			}
			c, err := health.New(opts)
			if err != nil {
				return usageError{err}
			}
			return c.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "watch the Clusters of every namespace (cluster set)")
	f.StringVarP(&selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod")
	f.DurationVar(&opts.Interval, "interval", 10*time.Second, "how often each member is probed")
	f.DurationVar(&opts.Timeout, "probe-timeout", 5*time.Second, "time allowed for one probe of one member")
	f.IntVar(&opts.Concurrency, "concurrency", 64, "most probes in flight at once")
	f.IntVar(&opts.FailureThreshold, "failure-threshold", 3, "probes in a row that must fail before Ready turns False")
	f.IntVar(&opts.SuccessThreshold, "success-threshold", 2, "probes in a row that must succeed before Ready turns True again")
	f.DurationVar(&opts.Heartbeat, "heartbeat", time.Minute, "how often lastProbeTime is refreshed when nothing else changes")
	f.BoolVar(&leaderElect, "leader-elect", false, "take turns with other replicas through a Lease in the registry")
	f.StringVar(&leaseNamespace, "leader-elect-namespace", "", "namespace of the Lease (default: the watched namespace)")
	f.StringVar(&leaseName, "leader-elect-name", "clusterregistry-health", "name of the Lease")
	f.StringVar(&metricsAddr, "metrics-bind-address", "", "serve Prometheus metrics at this address's /metrics, e.g. :8080 (default: off)")
	trust.AddFlags(f)
	f.BoolVarP(&verbose, "verbose", "v", false, "log every probe's outcome, not only transitions")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if leaderElect && allNamespaces && leaseNamespace == "" {
			return usageError{errors.New("--leader-elect with -A needs --leader-elect-namespace")}
		}
		return nil
	}
	return cmd
}

func serveMetrics(addr string, reg *prometheus.Registry, log logr.Logger) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		log.Error(err, "serving metrics", "address", addr)
	}
}
