package capacity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	crv1alpha1ac "github.com/cluster-registry/sdk/applyconfiguration/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/multicluster"
)

// Options configure a Controller.
type Options struct {
	// Registry is where the Clusters' status is written.
	Registry versioned.Interface
	// Members are the members observed, usually a started *multicluster.Fleet.
	Members fleetcache.Members
	// Interval is how often each member's figures are observed from its caches (10 s).
	Interval time.Duration
	// Threshold is how far a figure moves, as a fraction of the resource's allocatable, before
	// it is written again (0.05).
	Threshold float64
	// Heartbeat is how often figures that did not move are written anyway, so that
	// lastObservedTime says they are current (5 minutes).
	Heartbeat time.Duration
	// FieldManager names the Controller's writes (clusterregistry-capacity).
	FieldManager string
	Logger       logr.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Registry == nil || o.Members == nil {
		return o, errors.New("capacity: Options.Registry and Options.Members are required")
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Second
	}
	if o.Threshold <= 0 {
		o.Threshold = 0.05
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 5 * time.Minute
	}
	if o.FieldManager == "" {
		o.FieldManager = "clusterregistry-capacity"
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o, nil
}

// Controller keeps each member's status.resources: it caches the members' Nodes and Pods
// (only what Observe reads of them), observes each member every Interval, and writes the figures
// when they moved past Threshold, or once per Heartbeat. Make one with New; Start runs it.
type Controller struct {
	opts   Options
	cache  *fleetcache.Cache
	nodes  *fleetcache.Kind[*corev1.Node]
	pods   *fleetcache.Kind[*corev1.Pod]
	writes atomic.Int64

	mu      sync.Mutex
	written map[types.NamespacedName]*v1alpha1.ClusterResources
}

// New is a Controller of opts.
func New(opts Options) (*Controller, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{opts: opts, cache: fleetcache.New(opts.Members), written: map[types.NamespacedName]*v1alpha1.ClusterResources{}}
	if c.nodes, err = fleetcache.Typed[*corev1.Node](c.cache, corev1.SchemeGroupVersion.WithResource("nodes"), fleetcache.KindOptions{Transform: keepNode}); err != nil {
		return nil, fmt.Errorf("capacity: %w", err)
	}
	if c.pods, err = fleetcache.Typed[*corev1.Pod](c.cache, corev1.SchemeGroupVersion.WithResource("pods"), fleetcache.KindOptions{Transform: keepPod}); err != nil {
		return nil, fmt.Errorf("capacity: %w", err)
	}
	return c, nil
}

// Writes is how many status writes the Controller has made.
func (c *Controller) Writes() int64 { return c.writes.Load() }

// Start observes and writes until ctx ends, and stops the caches.
func (c *Controller) Start(ctx context.Context) error {
	if err := c.cache.Start(ctx); err != nil {
		return fmt.Errorf("capacity: %w", err)
	}
	defer c.cache.Stop()
	tick := time.NewTicker(c.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			c.pass(ctx, time.Now())
		}
	}
}

// pass observes every member whose caches are synced, and writes the figures that moved or
// whose heartbeat is due.
func (c *Controller) pass(ctx context.Context, now time.Time) {
	for _, m := range c.opts.Members.Members() {
		key := m.Name()
		if !c.synced(key) {
			c.opts.Logger.V(1).Info("caches not synced", "cluster", key.String())
			continue // a member whose caches cannot say keeps what was written
		}
		nodes, _ := c.nodes.List(key, nil)
		pods, _ := c.pods.List(key, nil)
		r := Observe(nodes, pods, now)
		written := c.lastWritten(m)
		if written != nil && !Moved(written, &r, c.opts.Threshold) && now.Sub(written.LastObservedTime.Time) < c.opts.Heartbeat {
			continue
		}
		if err := c.write(ctx, m, &r); err != nil {
			if ctx.Err() == nil {
				c.opts.Logger.Error(err, "writing capacity", "cluster", key.String())
			}
			continue
		}
		c.mu.Lock()
		c.written[key] = &r
		c.mu.Unlock()
	}
}

// synced says whether both of a member's caches are current.
func (c *Controller) synced(key types.NamespacedName) bool {
	n, okN := c.nodes.Status(key)
	p, okP := c.pods.Status(key)
	return okN && okP && n.State == fleetcache.Synced && p.State == fleetcache.Synced
}

// lastWritten is what this Controller last wrote for m, else what m's Cluster holds (written by
// an earlier run), so that a restart writes nothing that did not move.
func (c *Controller) lastWritten(m *multicluster.Member) *v1alpha1.ClusterResources {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.written[m.Name()]; r != nil {
		return r
	}
	return m.Cluster().Status.Resources
}

// write applies r as the Cluster's status.resources, with the Controller's field manager.
func (c *Controller) write(ctx context.Context, m *multicluster.Member, r *v1alpha1.ClusterResources) error {
	key := m.Name()
	res := crv1alpha1ac.ClusterResources().WithNodes(r.Nodes).WithReadyNodes(r.ReadyNodes).WithLastObservedTime(r.LastObservedTime)
	// An empty list is left out, not sent as null (a member with no ready Node has nothing
	// free); server-side apply removes what this manager wrote of it before.
	for list, with := range map[*corev1.ResourceList]func(corev1.ResourceList) *crv1alpha1ac.ClusterResourcesApplyConfiguration{
		&r.Capacity: res.WithCapacity, &r.Allocatable: res.WithAllocatable, &r.Requested: res.WithRequested, &r.LargestFree: res.WithLargestFree,
	} {
		if len(*list) > 0 {
			with(*list)
		}
	}
	ac := crv1alpha1ac.Cluster(key.Name, key.Namespace).WithStatus(crv1alpha1ac.ClusterStatus().WithResources(res))
	c.writes.Add(1)
	_, err := c.opts.Registry.ClusterregistryV1alpha1().Clusters(key.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: c.opts.FieldManager, Force: true})
	return err
}
