package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
)

// The controllers that one process runs together, on one Fleet, hosted by one controller-runtime
// Manager: one watch of the registry's Clusters, one Lease (--leader-elect), one metrics endpoint
// (authenticated and authorized by the registry, as kube-apiserver's own), one endpoint of
// /healthz and /readyz, one graceful stop.
const (
	controllerHealth          = "health"
	controllerRotation        = "rotation"
	controllerClusterProfiles = "clusterprofiles"
)

// gracefulStop is how long the controllers have to finish what they are doing once asked to stop
// (a rolling update): a probe's write, a renewal under way.
const gracefulStop = 30 * time.Second

// runHosted runs the chosen controllers until ctx ends. opts is the health controller's, filled
// in from the flags; the others take theirs from o.
func (o *HealthOptions) runHosted(ctx context.Context, reg *registry, opts health.Options, controllers map[string]bool) error {
	fleet := multicluster.NewFleet(reg.Clusters, opts.Resolver, multicluster.FleetOptions{Namespaces: opts.Namespaces, Selector: opts.Selector})
	opts.Members, opts.Namespaces, opts.Selector = fleet, nil, nil
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
			return fmt.Errorf("--cluster-profiles: %w", err)
		}
		namespaces := []string(nil)
		if !o.AllNamespaces {
			namespaces = []string{reg.Namespace}
		}
		if publisher, err = clusterprofile.NewPublisher(reg.Clusters, profiles, clusterprofile.PublishOptions{
			Namespaces: namespaces, ManagerName: o.ClusterManager, Resolver: opts.Resolver, Logger: opts.Logger.WithName("clusterprofiles")}); err != nil {
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
		if rotator, err = rotation.New(fleet, rotation.Options{Kube: reg.Kube, Logger: opts.Logger.WithName("rotation"), RenewAt: o.RenewAt, Interval: o.RotateInterval}); err != nil {
			return usageError{err}
		}
	}

	metrics := metricsserver.Options{BindAddress: "0"}
	if o.MetricsAddr != "" {
		// Served over TLS to callers the registry authenticates and allows to get /metrics
		// (nonResourceURLs), as a kube-apiserver's own metrics are.
		metrics = metricsserver.Options{BindAddress: o.MetricsAddr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
	}
	probes := "0"
	if o.ProbeAddr != "" {
		probes = o.ProbeAddr
	}
	leaseNamespace := o.LeaseNamespace
	if leaseNamespace == "" {
		leaseNamespace = reg.Namespace // with -A, Validate requires the flag
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
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-synced:
		case <-ctx.Done():
			return nil
		}
		g, ctx := errgroup.WithContext(ctx)
		if prober != nil {
			g.Go(func() error { return prober.Run(ctx) })
		}
		if rotator != nil {
			g.Go(func() error { return rotator.Run(ctx) })
		}
		if publisher != nil {
			g.Go(func() error { return publisher.Run(ctx) })
		}
		if err := g.Wait(); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	}))
	if err != nil {
		return err
	}
	var names []string
	for _, c := range []string{controllerHealth, controllerRotation, controllerClusterProfiles} {
		if controllers[c] {
			names = append(names, c)
		}
	}
	namespaces := []string{"(all)"}
	if !o.AllNamespaces {
		namespaces = []string{reg.Namespace}
	}
	leading := "off"
	if o.LeaderElect {
		leading = leaseNamespace + "/" + o.LeaseName
	}
	opts.Logger.Info("starting controllers", "controllers", names, "namespaces", namespaces, "selector", o.Selector,
		"leaderElection", leading, "metrics", orDash(o.MetricsAddr), "probes", orDash(o.ProbeAddr))
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
