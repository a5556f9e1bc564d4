package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/shard"
)

// Host is the SDK's controllers on one Fleet, ready to be added to a Manager.
type Host struct {
	fleet *multicluster.Fleet
	// members are what the member controllers work on: the Fleet, or this replica's shard of it.
	members  multicluster.ChangeSource
	sharding *sharding
	log      logr.Logger
	names    []string
	// runs are the controllers' Run methods, in the order they start.
	runs []func(context.Context) error
}

// New makes the controllers that opts asks for, over one Fleet of the registry, checking
// before anything runs that the registry serves what each needs. Nothing runs until the Host is
// added to a Manager and the Manager started. An error about one controller is a
// *ControllerError.
func New(opts Options) (*Host, error) {
	if opts.Config == nil || opts.Resolver == nil {
		return nil, errors.New("controllers: Options.Config and Options.Resolver are required")
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	registry, err := versioned.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("controllers: the registry's client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("controllers: the registry's client: %w", err)
	}
	h := &Host{log: log}
	h.fleet = multicluster.NewFleet(registry, opts.Resolver, multicluster.FleetOptions{Namespaces: opts.Namespaces, Selector: opts.Selector})
	h.members = h.fleet
	if opts.Shard != nil {
		peerOpts := *opts.Shard
		if peerOpts.Logger.GetSink() == nil {
			peerOpts.Logger = log.WithName("shard")
		}
		peers, err := shard.NewPeers(kube.CoordinationV1(), peerOpts)
		if err != nil {
			return nil, fmt.Errorf("controllers: %w", err)
		}
		view, err := h.shardView(opts, registry, peers)
		if err != nil {
			return nil, err
		}
		h.sharding = &sharding{peers: peers, view: view, handoffs: &handoffLog{log: log.WithName("shard")}, metrics: opts.Metrics}
		h.members = view
	} else if opts.WatchOwned {
		return nil, errors.New("controllers: Options.WatchOwned needs Options.Shard: a replica owns members only in a shard group")
	}
	// In the order they start: allControllers.
	if opts.Health != nil {
		if err := h.addHealth(opts, registry, kube); err != nil {
			return nil, err
		}
	}
	if opts.Rotation != nil {
		o := *opts.Rotation
		o.Kube, o.LeaderElection = kube, nil
		if o.Logger.GetSink() == nil {
			o.Logger = log.WithName(Rotation)
		}
		r, err := rotation.New(h.members, o)
		if err != nil {
			return nil, &ControllerError{Controller: Rotation, Invalid: true, Err: err}
		}
		h.add(Rotation, r.Run)
	}
	if opts.ClusterProfiles != nil {
		if err := h.addClusterProfiles(opts, registry); err != nil {
			return nil, err
		}
	}
	if opts.Placements != nil {
		if err := h.addPlacements(opts, registry); err != nil {
			return nil, err
		}
	}
	if opts.Releases != nil {
		if err := h.addReleases(opts, registry, kube); err != nil {
			return nil, err
		}
	}
	if opts.Capacity != nil {
		if err := h.addCapacity(*opts.Capacity, registry); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// addHealth adds the health controller over the host's members.
func (h *Host) addHealth(opts Options, registry versioned.Interface, kube kubernetes.Interface) error {
	o := *opts.Health
	o.Registry, o.Kube, o.Resolver, o.Members = registry, kube, opts.Resolver, h.members
	o.Namespaces, o.Selector, o.LeaderElection, o.Metrics = nil, nil, nil, opts.Metrics
	if o.Logger.GetSink() == nil {
		o.Logger = h.log
	}
	c, err := health.New(o)
	if err != nil {
		return &ControllerError{Controller: Health, Invalid: true, Err: err}
	}
	h.add(Health, c.Run)
	return nil
}

// addCapacity adds the capacity controller over the host's members.
func (h *Host) addCapacity(o capacity.Options, registry versioned.Interface) error {
	o.Registry, o.Members = registry, h.members
	if o.Logger.GetSink() == nil {
		o.Logger = h.log.WithName(Capacity)
	}
	c, err := capacity.New(o)
	if err != nil {
		return &ControllerError{Controller: Capacity, Invalid: true, Err: err}
	}
	h.add(Capacity, c.Start)
	return nil
}

// shardView is this replica's view of the members it owns: of the Host's Fleet, or, with
// WatchOwned, of Fleets of its own that watch only what it owns (and then the Host has no Fleet).
func (h *Host) shardView(opts Options, registry versioned.Interface, peers *shard.Peers) (*shard.View, error) {
	if !opts.WatchOwned {
		return shard.NewView(h.fleet, peers), nil
	}
	if opts.Placements != nil || opts.Releases != nil {
		return nil, errors.New("controllers: Options.WatchOwned: placements and releases weigh every member, so their replicas follow every Cluster; run them without WatchOwned, in a Deployment of their own")
	}
	view, err := shard.NewBucketView(registry, opts.Resolver, multicluster.FleetOptions{Namespaces: opts.Namespaces, Selector: opts.Selector}, peers)
	if err != nil {
		return nil, fmt.Errorf("controllers: %w", err)
	}
	h.fleet = nil
	return view, nil
}

// addClusterProfiles adds the ClusterProfile publisher over the host's members.
func (h *Host) addClusterProfiles(opts Options, registry versioned.Interface) error {
	profiles, err := cpversioned.NewForConfig(opts.Config)
	if err != nil {
		return &ControllerError{Controller: ClusterProfiles, Err: err}
	}
	// Refused before anything starts: without the CRD, the publisher could only log a
	// failed watch every second or two.
	if err := clusterprofile.Served(profiles.Discovery()); err != nil {
		return &ControllerError{Controller: ClusterProfiles, Err: err}
	}
	o := *opts.ClusterProfiles
	// The shared Fleet's members (this replica's, when sharded): no watch of its own.
	o.Members, o.Namespaces, o.Resolver = h.members, opts.Namespaces, opts.Resolver
	if o.Logger.GetSink() == nil {
		o.Logger = h.log.WithName(ClusterProfiles)
	}
	p, err := clusterprofile.NewPublisher(registry, profiles, o)
	if err != nil {
		return &ControllerError{Controller: ClusterProfiles, Invalid: true, Err: err}
	}
	h.add(ClusterProfiles, p.Run)
	return nil
}

// addPlacements adds the placements controller, over the whole Fleet (a decision weighs every
// member), deciding the Placements this replica owns when sharded.
func (h *Host) addPlacements(opts Options, registry versioned.Interface) error {
	decisions, err := cpversioned.NewForConfig(opts.Config)
	if err != nil {
		return &ControllerError{Controller: Placements, Err: err}
	}
	if err := scheduler.Served(decisions.Discovery()); err != nil {
		return &ControllerError{Controller: Placements, Err: err}
	}
	o := *opts.Placements
	o.Fresh = func() bool { return h.fleet.Status().Fresh() }
	if o.Namespace == "" && len(opts.Namespaces) == 1 {
		o.Namespace = opts.Namespaces[0]
	}
	if h.sharding != nil {
		// Each replica decides the Placements it owns among the live replicas, each over
		// every member of the Fleet: a decision weighs them all.
		peers := h.sharding.peers
		self := peers.Self().ID
		o.Owns = func(key types.NamespacedName) bool { return shard.Owner(key.String(), peers.Live()) == self }
	}
	if o.Logger.GetSink() == nil {
		o.Logger = h.log.WithName(Placements)
	}
	// The whole Fleet, not this replica's shard of it.
	c, err := scheduler.NewController(h.fleet, registry, decisions, o)
	if err != nil {
		return &ControllerError{Controller: Placements, Invalid: true, Err: err}
	}
	h.add(Placements, c.Run)
	return nil
}

// addReleases adds the releases controller over the host's members (this replica's, sharded).
func (h *Host) addReleases(opts Options, registry versioned.Interface, kube kubernetes.Interface) error {
	decisions, err := cpversioned.NewForConfig(opts.Config)
	if err != nil {
		return &ControllerError{Controller: Releases, Err: err}
	}
	if err := delivery.Served(decisions.Discovery()); err != nil {
		return &ControllerError{Controller: Releases, Err: err}
	}
	o := *opts.Releases
	o.Fresh = func() bool { return h.fleet.Status().Fresh() }
	if o.Namespace == "" && len(opts.Namespaces) == 1 {
		o.Namespace = opts.Namespaces[0]
	}
	if h.sharding != nil {
		// Each replica applies to the members it owns; the Release's owner writes its status.
		o.Sharding = delivery.NewSharding(h.sharding.peers, h.fleet)
	}
	if o.Logger.GetSink() == nil {
		o.Logger = h.log.WithName(Releases)
	}
	c, err := delivery.NewController(h.members, registry, kube, decisions, o)
	if err != nil {
		return &ControllerError{Controller: Releases, Invalid: true, Err: err}
	}
	h.add(Releases, c.Run)
	return nil
}

func (h *Host) add(name string, run func(context.Context) error) {
	h.names = append(h.names, name)
	h.runs = append(h.runs, run)
}

// Controllers are the names of the controllers the Host runs, in the order they start.
func (h *Host) Controllers() []string { return slices.Clone(h.names) }

// Fleet is the Host's one Fleet of the registry's Clusters: a tool's own controllers may share
// it (it is started when the Manager starts, on every replica). It is nil with
// Options.WatchOwned, where each replica watches only the members it owns (Members).
func (h *Host) Fleet() *multicluster.Fleet { return h.fleet }

// Members are the members this replica's controllers work on: the Fleet's, or, when sharded,
// the ones it owns.
func (h *Host) Members() multicluster.ChangeSource { return h.members }

// Shard is this replica's membership of its group; nil when not sharded.
func (h *Host) Shard() *shard.Peers {
	if h.sharding == nil {
		return nil
	}
	return h.sharding.peers
}

// Ready is a readiness check (healthz.Checker): ready once the Fleet follows the registry, leader
// or not, so that a rolling update does not wait on the Lease. AddToManager adds it as "registry".
func (h *Host) Ready(*http.Request) error {
	if h.fleet == nil {
		return h.sharding.view.Ready()
	}
	if st := h.fleet.Status(); !st.Fresh() {
		return errors.New(st.String())
	}
	return nil
}

// AddToManager adds the Host to mgr: the Fleet, on every replica; the controllers, on the
// leader (mgr's leader election), or on every replica when sharded; and the readiness check
// "registry". Each controller starts once the Fleet has listed the registry; an error of one
// stops the others and the Manager.
func (h *Host) AddToManager(mgr manager.Manager) error {
	synced := make(chan struct{})
	if h.fleet == nil {
		close(synced) // the shard's view follows the registry itself, as it runs
	} else if err := mgr.Add(follower{fleet: h.fleet, synced: synced}); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("registry", h.Ready); err != nil {
		return err
	}
	work := func(ctx context.Context) error {
		select {
		case <-synced:
		case <-ctx.Done():
			return nil
		}
		g, gctx := errgroup.WithContext(ctx)
		if h.sharding != nil {
			if err := h.sharding.start(gctx, g); err != nil {
				return err
			}
		}
		for _, run := range h.runs {
			g.Go(func() error { return run(gctx) })
		}
		// An error of one ends the others; the process's own stop is not an error.
		if err := g.Wait(); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	}
	if h.sharding != nil {
		return mgr.Add(everyReplica(work)) // each replica works on its own members
	}
	return mgr.Add(manager.RunnableFunc(work)) // the leader alone, when mgr elects one
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

// everyReplica runs on every replica, whatever the Manager's leader election says.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }
