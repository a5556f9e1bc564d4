package main

import (
	"context"
	"crypto/tls"
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
	"github.com/cluster-registry/sdk/controllers"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/shard"
)

// The controllers that one process runs together, on one Fleet, hosted by one controller-runtime
// Manager (package controllers): one watch of the registry's Clusters, one Lease
// (--leader-elect), one metrics endpoint (authenticated and authorized by the registry, as
// kube-apiserver's own), one endpoint of /healthz and /readyz, one graceful stop. This file maps
// the flags to package controllers' Options and serves what a process adds: metrics and probes.

// allControllers are the names --controllers takes, in the order they start.
var allControllers = []string{controllers.Health, controllers.Rotation, controllers.ClusterProfiles, controllers.Placements, controllers.Releases, controllers.Capacity}

// schedulerName is the name the placements controller writes in its PlacementDecisions.
const schedulerName = "clusterregistry"

// placementsOptions are the placements controller's: its decisions name this command.
func placementsOptions() *scheduler.ControllerOptions {
	return &scheduler.ControllerOptions{Options: scheduler.Options{SchedulerName: schedulerName}}
}

// gracefulStop is how long the controllers have to finish what they are doing once asked to stop
// (a rolling update): a probe's write, a renewal under way.
const gracefulStop = 30 * time.Second

// runControllers runs the controllers opts names until ctx ends; chose names the flag that
// chose a controller, for an error about it.
func (h *hostFlags) runControllers(ctx context.Context, env *hostEnv, opts controllers.Options, chose func(controller string) string) error {
	leaseNamespace := h.leaseNamespace(env.reg)
	h.shard(&opts, leaseNamespace)
	host, err := controllers.New(opts)
	if cerr := (*controllers.ControllerError)(nil); errors.As(err, &cerr) {
		if cerr.Invalid {
			return usageError{fmt.Errorf("%s: %w", chose(cerr.Controller), cerr.Err)}
		}
		return fmt.Errorf("%s: %w", chose(cerr.Controller), cerr.Err)
	}
	if err != nil {
		return usageError{err}
	}
	mgr, err := h.manager(ctx, env, leaseNamespace)
	if err != nil {
		return err
	}
	if err := host.AddToManager(mgr); err != nil {
		return err
	}
	namespaces := []string{"(all)"}
	if !h.AllNamespaces {
		namespaces = []string{env.reg.Namespace}
	}
	leading, sharded := "off", "off"
	if h.LeaderElect {
		leading = leaseNamespace + "/" + h.LeaseName
	}
	if peers := host.Shard(); peers != nil {
		sharded = leaseNamespace + "/" + h.ShardGroup + " as " + peers.Self().ID
	}
	env.logger.Info("starting controllers", "controllers", host.Controllers(), "namespaces", namespaces, "selector", h.Selector,
		"leaderElection", leading, "shardGroup", sharded, "metrics", orDash(h.MetricsAddr), "probes", orDash(h.ProbeAddr))
	return mgr.Start(ctx)
}

// manager is the controllers' host: a controller-runtime Manager with the flags' Lease, metrics
// and probes.
func (h *hostFlags) manager(ctx context.Context, env *hostEnv, leaseNamespace string) (manager.Manager, error) {
	metrics := metricsserver.Options{BindAddress: "0"}
	if h.MetricsAddr != "" {
		var err error
		if metrics, err = h.metricsServer(ctx, env.reg, env.logger); err != nil {
			return nil, err
		}
	}
	probes := "0"
	if h.ProbeAddr != "" {
		probes = h.ProbeAddr
	}
	mgr, err := manager.New(env.reg.Config, manager.Options{
		Scheme:                        runtime.NewScheme(),
		Logger:                        env.logger,
		Metrics:                       metrics,
		HealthProbeBindAddress:        probes,
		LeaderElection:                h.LeaderElect,
		LeaderElectionID:              h.LeaseName,
		LeaderElectionNamespace:       leaseNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(gracefulStop),
	})
	if err != nil {
		return nil, fmt.Errorf("starting the controllers' host: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// hostOptions are package controllers' Options for the Clusters env watches, with no
// controller chosen yet: each command adds those its flags choose.
func (h *hostFlags) hostOptions(env *hostEnv) controllers.Options {
	return controllers.Options{Config: env.reg.Config, Resolver: env.resolver, Namespaces: env.namespaces, Selector: h.selector,
		Logger: env.logger, Metrics: ctrlmetrics.Registry}
}

// shard divides the members among the replicas of --shard-group, each working on its own;
// without it, each works on them all, and --leader-elect makes them take turns.
func (h *hostFlags) shard(opts *controllers.Options, leaseNamespace string) {
	if h.ShardGroup == "" {
		return
	}
	opts.Shard = &shard.PeerOptions{Namespace: leaseNamespace, Group: h.ShardGroup, Weight: h.ShardWeight}
	// Each replica then watches only the Clusters it owns, unless a controller weighs every
	// member (placements, releases).
	opts.WatchOwned = opts.Placements == nil && opts.Releases == nil
}

// metricsServer serves /metrics over TLS to callers the registry authenticates (a bearer token
// its TokenReview accepts, or a client certificate of the CAs it trusts) and allows to get
// /metrics (nonResourceURLs), as a kube-apiserver's own metrics are. Without
// --metrics-client-ca-file the CAs are the registry's own, as it publishes them; a registry that
// does not let this process read them leaves bearer tokens only, and the log says so.
func (h *hostFlags) metricsServer(ctx context.Context, reg *registry, log logr.Logger) (metricsserver.Options, error) {
	var clientCA []byte
	var err error
	if h.MetricsClientCAFile != "" {
		if clientCA, err = os.ReadFile(h.MetricsClientCAFile); err != nil {
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
		BindAddress: h.MetricsAddr, SecureServing: true,
		FilterProvider: func(*rest.Config, *http.Client) (metricsserver.Filter, error) { return checker.Filter, nil },
		// Ask for a client certificate without requiring one (tokens work too); the
		// authenticator verifies it against the CAs above, so Go's handshake need not.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert }},
	}, nil
}
