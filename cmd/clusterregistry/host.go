package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cluster-registry/sdk/callerauth"
	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/controllers"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/election"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/shard"
)

// The controllers that one process runs together, on one Fleet, hosted by one controller-runtime
// Manager (package controllers): one watch of the registry's Clusters, one Lease
// (--leader-elect), one metrics endpoint (authenticated and authorized by the registry, as
// kube-apiserver's own), one endpoint of /healthz and /readyz, one graceful stop. This file maps
// the flags to package controllers' Options and serves what a process adds: metrics and probes.

// allControllers are the names --controllers takes, in the order they start.
var allControllers = []string{controllers.Health, controllers.Rotation, controllers.ClusterProfiles, controllers.Placements, controllers.Releases}

// schedulerName is the name the placements controller writes in its PlacementDecisions.
const schedulerName = "clusterregistry"

// gracefulStop is how long the controllers have to finish what they are doing once asked to stop
// (a rolling update): a probe's write, a renewal under way.
const gracefulStop = 30 * time.Second

// runControllers runs the chosen controllers until ctx ends. opts is the health controller's,
// filled in from the flags; the others take theirs from o.
func (o *HealthOptions) runControllers(ctx context.Context, reg *registry, opts health.Options, chosen map[string]bool) error {
	leaseNamespace := o.LeaseNamespace
	if leaseNamespace == "" {
		leaseNamespace = reg.Namespace // with -A, Validate requires the flag
	}
	hostOpts := o.hostOptions(reg, opts, chosen, leaseNamespace)
	host, err := controllers.New(hostOpts)
	if cerr := (*controllers.ControllerError)(nil); errors.As(err, &cerr) {
		if cerr.Invalid {
			return usageError{fmt.Errorf("%s: %w", o.chose(cerr.Controller), cerr.Err)}
		}
		return fmt.Errorf("%s: %w", o.chose(cerr.Controller), cerr.Err)
	}
	if err != nil {
		return usageError{err}
	}

	metrics := metricsserver.Options{BindAddress: "0"}
	if o.MetricsAddr != "" {
		if metrics, err = o.metricsServer(ctx, reg, opts.Logger); err != nil {
			return err
		}
	}
	probes := "0"
	if o.ProbeAddr != "" {
		probes = o.ProbeAddr
	}
	mgr, err := manager.New(reg.Config, manager.Options{
		Scheme:                        runtime.NewScheme(),
		Logger:                        opts.Logger,
		Metrics:                       metrics,
		HealthProbeBindAddress:        probes,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaseName,
		LeaderElectionNamespace:       leaseNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(gracefulStop),
	})
	if err != nil {
		return fmt.Errorf("starting the controllers' host: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := host.AddToManager(mgr); err != nil {
		return err
	}
	namespaces := []string{"(all)"}
	if !o.AllNamespaces {
		namespaces = []string{reg.Namespace}
	}
	leading, sharded := "off", "off"
	if o.LeaderElect {
		leading = leaseNamespace + "/" + o.LeaseName
	}
	if peers := host.Shard(); peers != nil {
		sharded = leaseNamespace + "/" + o.ShardGroup + " as " + peers.Self().ID
	}
	opts.Logger.Info("starting controllers", "controllers", host.Controllers(), "namespaces", namespaces, "selector", o.Selector,
		"leaderElection", leading, "shardGroup", sharded, "metrics", orDash(o.MetricsAddr), "probes", orDash(o.ProbeAddr))
	return mgr.Start(ctx)
}

// hostOptions are package controllers' Options for the chosen controllers, from the flags; opts
// is the health controller's.
func (o *HealthOptions) hostOptions(reg *registry, opts health.Options, chosen map[string]bool, leaseNamespace string) controllers.Options {
	hostOpts := controllers.Options{Config: reg.Config, Resolver: opts.Resolver, Namespaces: opts.Namespaces, Selector: opts.Selector,
		Logger: opts.Logger, Metrics: ctrlmetrics.Registry}
	if chosen[controllers.Health] {
		hostOpts.Health = &opts
	}
	if chosen[controllers.Rotation] {
		hostOpts.Rotation = &rotation.Options{RenewAt: o.RenewAt, Interval: o.RotateInterval}
	}
	if chosen[controllers.ClusterProfiles] {
		hostOpts.ClusterProfiles = &clusterprofile.PublishOptions{ManagerName: o.ClusterManager, TunnelProxy: o.ProfileTunnelProxy}
	}
	if chosen[controllers.Placements] {
		hostOpts.Placements = &scheduler.ControllerOptions{Options: scheduler.Options{SchedulerName: schedulerName}}
	}
	if chosen[controllers.Releases] {
		hostOpts.Releases = o.releasesOptions()
	}
	// With --shard-group the replicas divide the members among themselves, each working on its
	// own; without, each works on them all, and --leader-elect makes them take turns.
	if o.ShardGroup != "" {
		hostOpts.Shard = &shard.PeerOptions{Namespace: leaseNamespace, Group: o.ShardGroup, Weight: o.ShardWeight}
		// Each replica then watches only the Clusters it owns, unless a controller weighs every
		// member (placements, releases).
		hostOpts.WatchOwned = !chosen[controllers.Placements] && !chosen[controllers.Releases]
	}
	return hostOpts
}

// metricsServer serves /metrics over TLS to callers the registry authenticates (a bearer token
// its TokenReview accepts, or a client certificate of the CAs it trusts) and allows to get
// /metrics (nonResourceURLs), as a kube-apiserver's own metrics are. Without
// --metrics-client-ca-file the CAs are the registry's own, as it publishes them; a registry that
// does not let this process read them leaves bearer tokens only, and the log says so.
func (o *HealthOptions) metricsServer(ctx context.Context, reg *registry, log logr.Logger) (metricsserver.Options, error) {
	var clientCA []byte
	var err error
	if o.MetricsClientCAFile != "" {
		if clientCA, err = os.ReadFile(o.MetricsClientCAFile); err != nil {
			return metricsserver.Options{}, fmt.Errorf("--metrics-client-ca-file: %w", err)
		}
	} else if clientCA, err = callerauth.RegistryClientCA(ctx, reg.Kube); err != nil {
		log.Info("metrics: callers may authenticate with bearer tokens only, not client certificates; give --metrics-client-ca-file, or grant the reading", "reason", err.Error())
	}
	checker, err := callerauth.New(reg.Kube, callerauth.Options{ClientCA: clientCA})
	if err != nil {
		return metricsserver.Options{}, fmt.Errorf("--metrics-client-ca-file: %w", err)
	}
	return metricsserver.Options{
		BindAddress: o.MetricsAddr, SecureServing: true,
		FilterProvider: func(*rest.Config, *http.Client) (metricsserver.Filter, error) { return checker.Filter, nil },
		// Ask for a client certificate without requiring one (tokens work too); the
		// authenticator verifies it against the CAs above, so Go's handshake need not.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert }},
	}, nil
}

// releasesOptions are the releases controller's options from the flags. Unsharded, releases
// controllers of one set take turns on the Lease clusterregistry-releases in the set's own
// namespace, elected or not, whatever --leader-elect-namespace says: a second process started
// beside a Deployment's (or the demo's), with -n or -A, waits rather than apply the same
// Releases.
func (o *HealthOptions) releasesOptions() *delivery.ControllerOptions {
	opts := &delivery.ControllerOptions{Charts: o.charts, MemberTimeout: o.ReleaseMemberTimeout}
	if o.ShardGroup == "" {
		opts.Lease = &election.Lease{Name: delivery.DefaultLeaseName}
	}
	return opts
}

// chartFetcher is the releases controller's Fetcher of charts in repositories, from the --chart-*
// flags.
func (o *HealthOptions) chartFetcher() (*chartrepo.Fetcher, error) {
	opts := chartrepo.Options{Hosts: o.ChartHosts, AllowPlainHTTP: o.ChartPlainHTTP}
	if o.ChartCAFile != "" {
		pem, err := os.ReadFile(o.ChartCAFile)
		if err != nil {
			return nil, fmt.Errorf("--chart-ca-file: %w", err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--chart-ca-file %s: no PEM certificate in it", o.ChartCAFile)
		}
		opts.RootCAs = roots
	}
	return chartrepo.NewFetcher(opts), nil
}
