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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	crv1alpha1ac "github.com/cluster-registry/sdk/applyconfiguration/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/multicluster"
)

// written is what the Controller last wrote for a member, and the UID of the Cluster it wrote
// it to.
type written struct {
	uid        types.UID
	figures    *v1alpha1.ClusterResources
	properties []v1alpha1.ClusterStatusProperty
}

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
	opts  Options
	cache *fleetcache.Cache
	nodes *fleetcache.Kind[*corev1.Node]
	pods  *fleetcache.Kind[*corev1.Pod]
	// props are the members' ClusterProperty objects (the About API), where they serve them.
	props  *fleetcache.Kind[*unstructured.Unstructured]
	writes atomic.Int64

	mu      sync.Mutex
	written map[types.NamespacedName]written
	// refused names, by member, the kind a member refuses to list, once said.
	refused map[types.NamespacedName]string
}

// New is a Controller of opts.
func New(opts Options) (*Controller, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{opts: opts, cache: fleetcache.New(opts.Members), written: map[types.NamespacedName]written{},
		refused: map[types.NamespacedName]string{}}
	if c.nodes, err = fleetcache.Typed[*corev1.Node](c.cache, corev1.SchemeGroupVersion.WithResource("nodes"), fleetcache.KindOptions{Transform: keepNode}); err != nil {
		return nil, fmt.Errorf("capacity: %w", err)
	}
	if c.pods, err = fleetcache.Typed[*corev1.Pod](c.cache, corev1.SchemeGroupVersion.WithResource("pods"), fleetcache.KindOptions{Transform: keepPod}); err != nil {
		return nil, fmt.Errorf("capacity: %w", err)
	}
	if c.props, err = fleetcache.Dynamic(c.cache, ClusterPropertyResource, fleetcache.KindOptions{Transform: keepProperty}); err != nil {
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
// whose heartbeat is due. What it remembers of members that left goes.
func (c *Controller) pass(ctx context.Context, now time.Time) {
	members := c.opts.Members.Members()
	present := make(map[types.NamespacedName]bool, len(members))
	for _, m := range members {
		present[m.Name()] = true
		if c.synced(m.Name()) { // a member whose caches cannot say keeps what was written
			c.observe(ctx, m, now)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.written {
		if !present[key] {
			delete(c.written, key)
		}
	}
	for key := range c.refused {
		if !present[key] {
			delete(c.refused, key)
		}
	}
}

// observe writes m's figures and properties when they moved past the threshold, or changed,
// or when the heartbeat is due.
func (c *Controller) observe(ctx context.Context, m *multicluster.Member, now time.Time) {
	key := m.Name()
	nodes, _ := c.nodes.List(key, nil)
	pods, _ := c.pods.List(key, nil)
	r := Observe(nodes, pods, now)
	last := c.lastWritten(m)
	props := c.properties(key, now, last.properties)
	if last.figures != nil && !Moved(last.figures, &r, c.opts.Threshold) && now.Sub(last.figures.LastObservedTime.Time) < c.opts.Heartbeat &&
		sameProperties(last.properties, props) {
		return
	}
	if err := c.write(ctx, m, &r, props); err != nil {
		if ctx.Err() == nil {
			c.opts.Logger.Error(err, "writing capacity", "cluster", key.String())
		}
		return
	}
	c.mu.Lock()
	c.written[key] = written{uid: m.Cluster().UID, figures: &r, properties: props}
	c.mu.Unlock()
}

// properties are what key's ClusterProperty objects say, observed at now: none when the
// member does not serve the About API; last (what was written) while its cache cannot say, as
// when the member's account may not list them.
func (c *Controller) properties(key types.NamespacedName, now time.Time, last []v1alpha1.ClusterStatusProperty) []v1alpha1.ClusterStatusProperty {
	st, ok := c.props.Status(key)
	switch {
	case ok && st.State == fleetcache.Synced:
		objs, _ := c.props.List(key, nil)
		props, skipped := Properties(objs, now)
		if skipped > 0 {
			c.opts.Logger.V(1).Info("ClusterProperties left out of status.properties (no value, a value over 128 characters, or more than 64)",
				"cluster", key.String(), "count", skipped)
		}
		return props
	case ok && st.State == fleetcache.Syncing && apierrors.IsNotFound(st.Err):
		return nil // no About API on the member
	}
	return last
}

// synced says whether both of a member's caches are current. A member that refuses to list
// Nodes or Pods to its credentials is said once (and again when it changes), since its
// figures are then never written: join's default ClusterRole, edit, has no Nodes.
func (c *Controller) synced(key types.NamespacedName) bool {
	n, okN := c.nodes.Status(key)
	p, okP := c.pods.Status(key)
	refused := ""
	switch {
	case okN && n.Refused():
		refused = "nodes"
	case okP && p.Refused():
		refused = "pods"
	}
	c.mu.Lock()
	said := c.refused[key]
	if refused == "" {
		delete(c.refused, key)
	} else {
		c.refused[key] = refused
	}
	c.mu.Unlock()
	if refused != "" && said != refused {
		c.opts.Logger.Info("the member refuses to list "+refused+" to its credentials: its status.resources is not written until its account may list and watch nodes and pods",
			"cluster", key.String())
	}
	return okN && okP && n.State == fleetcache.Synced && p.State == fleetcache.Synced
}

// lastWritten is what this Controller last wrote for m's Cluster, else what the Cluster holds
// (written by an earlier run), so that a restart writes nothing that did not move. A Cluster
// registered again (another UID) is judged on what it holds, not on what its predecessor had.
func (c *Controller) lastWritten(m *multicluster.Member) written {
	cl := m.Cluster()
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.written[m.Name()]; ok && w.uid == cl.UID {
		return w
	}
	return written{uid: cl.UID, figures: cl.Status.Resources, properties: cl.Status.Properties}
}

// write applies r as the Cluster's status.resources and props as its status.properties, with
// the Controller's field manager.
func (c *Controller) write(ctx context.Context, m *multicluster.Member, r *v1alpha1.ClusterResources, props []v1alpha1.ClusterStatusProperty) error {
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
	status := crv1alpha1ac.ClusterStatus().WithResources(res)
	for _, p := range props { // none: server-side apply removes those written before
		status.WithProperties(crv1alpha1ac.ClusterStatusProperty().WithName(p.Name).WithValue(p.Value).WithLastObservedTime(p.LastObservedTime))
	}
	ac := crv1alpha1ac.Cluster(key.Name, key.Namespace).WithStatus(status)
	c.writes.Add(1)
	_, err := c.opts.Registry.ClusterregistryV1alpha1().Clusters(key.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: c.opts.FieldManager, Force: true})
	return err
}
