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
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/internal/callerauth"
	"github.com/cluster-registry/sdk/internal/metricsreg"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/shard"
)

// The controllers that one process runs together, on one Fleet, hosted by one controller-runtime
// Manager: one watch of the registry's Clusters, one Lease (--leader-elect), one metrics endpoint
// (authenticated and authorized by the registry, as kube-apiserver's own), one endpoint of
// /healthz and /readyz, one graceful stop.
const (
	controllerHealth          = "health"
	controllerRotation        = "rotation"
	controllerClusterProfiles = "clusterprofiles"
	controllerPlacements      = "placements"
)

// allControllers are the names --controllers takes, in the order they start.
var allControllers = []string{controllerHealth, controllerRotation, controllerClusterProfiles, controllerPlacements}

// schedulerName is the name the placements controller writes in its PlacementDecisions.
const schedulerName = "clusterregistry"

// gracefulStop is how long the controllers have to finish what they are doing once asked to stop
// (a rolling update): a probe's write, a renewal under way.
const gracefulStop = 30 * time.Second

// runHosted runs the chosen controllers until ctx ends. opts is the health controller's, filled
// in from the flags; the others take theirs from o.
func (o *HealthOptions) runHosted(ctx context.Context, reg *registry, opts health.Options, controllers map[string]bool) error {
	fleet := multicluster.NewFleet(reg.Clusters, opts.Resolver, multicluster.FleetOptions{Namespaces: opts.Namespaces, Selector: opts.Selector})
	leaseNamespace := o.LeaseNamespace
	if leaseNamespace == "" {
		leaseNamespace = reg.Namespace // with -A, Validate requires the flag
	}
	// With --shard-group the replicas divide the members among themselves, each working on its
	// own (a shard.View of the Fleet); without, each works on them all, and --leader-elect makes
	// them take turns.
	var members multicluster.ChangeSource = fleet
	var sharding *shardRun
	if o.ShardGroup != "" {
		peers, err := shard.NewPeers(reg.Kube.CoordinationV1(), shard.PeerOptions{Namespace: leaseNamespace, Group: o.ShardGroup, Weight: o.ShardWeight, Logger: opts.Logger.WithName("shard")})
		if err != nil {
			return usageError{err}
		}
		sharding = &shardRun{peers: peers, view: shard.NewView(fleet, peers), handoffs: &handoffLog{log: opts.Logger.WithName("shard")}}
		members = sharding.view
	}
	opts.Members, opts.Namespaces, opts.Selector = members, nil, nil
	opts.LeaderElection = nil // the Manager's Lease, for all of them
	opts.Metrics = ctrlmetrics.Registry

	var publisher *clusterprofile.Publisher
	if controllers[controllerClusterProfiles] {
		profiles, err := cpversioned.NewForConfig(reg.Config)
		if err != nil {
			return err
		}
		// Refused before anything starts: without the CRD, the publisher could only log a
		// failed watch every second or two.
		if err := clusterprofile.Served(profiles.Discovery()); err != nil {
			return fmt.Errorf("%s: %w", o.chose(controllerClusterProfiles), err)
		}
		namespaces := []string(nil)
		if !o.AllNamespaces {
			namespaces = []string{reg.Namespace}
		}
		// The shared Fleet's members (this replica's, with --shard-group): no watch of Clusters
		// of its own.
		if publisher, err = clusterprofile.NewPublisher(reg.Clusters, profiles, clusterprofile.PublishOptions{
			Members: members, Namespaces: namespaces, ManagerName: o.ClusterManager, Resolver: opts.Resolver,
			Logger: opts.Logger.WithName("clusterprofiles")}); err != nil {
			return err
		}
	}
	var placements *scheduler.Controller
	if controllers[controllerPlacements] {
		registry, err := versioned.NewForConfig(reg.Config)
		if err != nil {
			return err
		}
		decisions, err := cpversioned.NewForConfig(reg.Config)
		if err != nil {
			return err
		}
		// Refused before anything starts, as for the publisher.
		if err := scheduler.Served(decisions.Discovery()); err != nil {
			return fmt.Errorf("--controllers placements: %w", err)
		}
		popts := scheduler.ControllerOptions{Options: scheduler.Options{
			SchedulerName: schedulerName, Fresh: func() bool { return fleet.Status().Fresh() },
			Logger: opts.Logger.WithName("placements")}}
		if !o.AllNamespaces {
			popts.Namespace = reg.Namespace
		}
		if sharding != nil {
			// Each replica decides the Placements it owns among the live replicas, each over
			// every member of the Fleet: a decision weighs them all.
			self := sharding.peers.Self().ID
			popts.Owns = func(key types.NamespacedName) bool { return shard.Owner(key.String(), sharding.peers.Live()) == self }
		}
		// The whole Fleet, not this replica's shard of it.
		if placements, err = scheduler.NewController(fleet, registry, decisions, popts); err != nil {
			return err
		}
	}
	var prober *health.Controller
	if controllers[controllerHealth] {
		var err error
		if prober, err = health.New(opts); err != nil {
			return usageError{err}
		}
	}
	var rotator *rotation.Rotator
	if controllers[controllerRotation] {
		var err error
		if rotator, err = rotation.New(members, rotation.Options{Kube: reg.Kube, Logger: opts.Logger.WithName("rotation"), RenewAt: o.RenewAt, Interval: o.RotateInterval}); err != nil {
			return usageError{err}
		}
	}

	metrics := metricsserver.Options{BindAddress: "0"}
	if o.MetricsAddr != "" {
		var err error
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
	// Every replica follows the registry, leader or not, so that it is ready to take over, and
	// says it is ready once it does: a rolling update does not wait on the Lease.
	synced := make(chan struct{})
	if err := mgr.Add(follower{fleet: fleet, synced: synced}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("registry", func(*http.Request) error {
		if st := fleet.Status(); !st.Fresh() {
			return errors.New(st.String())
		}
		return nil
	}); err != nil {
		return err
	}
	work := func(ctx context.Context) error {
		select {
		case <-synced:
		case <-ctx.Done():
			return nil
		}
		g, gctx := errgroup.WithContext(ctx)
		if sharding != nil {
			if err := sharding.register(); err != nil {
				return err
			}
			g.Go(func() error { return sharding.peers.Run(gctx) })
			g.Go(func() error { return sharding.view.Run(gctx) })
			g.Go(func() error { return sharding.handoffs.run(gctx) })
		}
		if prober != nil {
			g.Go(func() error { return prober.Run(gctx) })
		}
		if rotator != nil {
			g.Go(func() error { return rotator.Run(gctx) })
		}
		if publisher != nil {
			g.Go(func() error { return publisher.Run(gctx) })
		}
		if placements != nil {
			g.Go(func() error { return placements.Run(gctx) })
		}
		// An error of one ends the others; the process's own stop is not an error.
		if err := g.Wait(); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	}
	if sharding != nil {
		err = mgr.Add(everyReplica(work)) // each replica works on its own members
	} else {
		err = mgr.Add(manager.RunnableFunc(work)) // the leader alone, with --leader-elect
	}
	if err != nil {
		return err
	}
	var names []string
	for _, c := range allControllers {
		if controllers[c] {
			names = append(names, c)
		}
	}
	namespaces := []string{"(all)"}
	if !o.AllNamespaces {
		namespaces = []string{reg.Namespace}
	}
	leading, sharded := "off", "off"
	if o.LeaderElect {
		leading = leaseNamespace + "/" + o.LeaseName
	}
	if sharding != nil {
		sharded = leaseNamespace + "/" + o.ShardGroup + " as " + sharding.peers.Self().ID
	}
	opts.Logger.Info("starting controllers", "controllers", names, "namespaces", namespaces, "selector", o.Selector,
		"leaderElection", leading, "shardGroup", sharded, "metrics", orDash(o.MetricsAddr), "probes", orDash(o.ProbeAddr))
	return mgr.Start(ctx)
}

// follower runs the Fleet on every replica, leader or not.
type follower struct {
	fleet  *multicluster.Fleet
	synced chan struct{}
}

func (f follower) Start(ctx context.Context) error {
	if err := f.fleet.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	close(f.synced)
	<-ctx.Done()
	f.fleet.Stop()
	return nil
}

func (follower) NeedLeaderElection() bool { return false }

// everyReplica runs on every replica, whatever --leader-elect says.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }

// shardRun is a sharded replica's part: its membership of the group, its view of the Fleet, and
// the metrics that say how the members are divided.
type shardRun struct {
	peers    *shard.Peers
	view     *shard.View
	handoffs *handoffLog
}

// register adds the sharding metrics to controller-runtime's registry, replacing those of an
// earlier run in the process: owned members and live replicas as this replica sees them, and
// the members it took or gave up.
func (s *shardRun) register() error {
	moves := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clusterregistry_shard_member_moves_total",
		Help: "Members this replica took (in) or gave up (out) as the fleet and the replicas changed.",
	}, []string{"direction"})
	collectors := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "clusterregistry_shard_owned_members", Help: "Members this replica owns."},
			func() float64 { return float64(len(s.view.Members())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "clusterregistry_shard_peers", Help: "Live replicas of the group, as this replica sees them."},
			func() float64 { return float64(len(s.peers.Live())) }),
		moves,
	}
	if err := metricsreg.Replace(ctrlmetrics.Registry, collectors...); err != nil {
		return err
	}
	s.view.Subscribe(func(ev multicluster.MemberEvent) {
		s.handoffs.observe(ev)
		switch ev.Type {
		case multicluster.MemberAdded:
			moves.WithLabelValues("in").Inc()
		case multicluster.MemberRemoved:
			moves.WithLabelValues("out").Inc()
		}
	})
	return nil
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
