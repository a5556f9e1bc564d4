package multicluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/informers/externalversions"
)

// FleetOptions chooses which Clusters of the registry make up a Fleet.
type FleetOptions struct {
	// Namespaces are the cluster sets to include; empty means all namespaces.
	Namespaces []string
	// Selector keeps only Clusters whose labels match; nil keeps all.
	Selector labels.Selector
	// Scheme is the scheme of members' controller-runtime clients; nil means client-go's.
	Scheme *runtime.Scheme
}

// Fleet is a set of Members: a live view of the registry (NewFleet), or a fixed set of Clusters
// (StaticFleet, LoadFleet). Members come and go with their Clusters; a Member's clients survive an
// edit that does not change how the member is reached. A Fleet is safe for concurrent use.
type Fleet struct {
	resolver *Resolver
	opts     FleetOptions

	mu      sync.RWMutex
	members map[types.NamespacedName]*Member

	registry  versioned.Interface
	factories []externalversions.SharedInformerFactory
	cancel    context.CancelFunc
}

// NewFleet returns a Fleet that follows the registry's Clusters. Call Start to begin, Stop to end.
func NewFleet(registry versioned.Interface, resolver *Resolver, opts FleetOptions) *Fleet {
	f := newFleet(resolver, opts)
	f.registry = registry
	return f
}

// StaticFleet returns a Fleet of the given Clusters that match opts, such as Clusters read from a
// file or built by hand. It needs no Start.
func StaticFleet(resolver *Resolver, clusters []v1alpha1.Cluster, opts FleetOptions) *Fleet {
	f := newFleet(resolver, opts)
	for i := range clusters {
		f.upsert(&clusters[i])
	}
	return f
}

// LoadFleet reads a ClusterList (or a List of Clusters, as `kubectl get clusters -o yaml` writes)
// from a YAML or JSON file and returns a StaticFleet of the Clusters that match opts. Every
// Cluster must pass ValidateCluster; the error names each one that does not.
func LoadFleet(path string, resolver *Resolver, opts FleetOptions) (*Fleet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list v1alpha1.ClusterList
	if err := yaml.UnmarshalStrict(data, &list); err != nil {
		return nil, fmt.Errorf("%s: not a ClusterList: %w", path, err)
	}
	var errs []error
	for i := range list.Items {
		c := &list.Items[i]
		if c.Kind != "" && c.Kind != "Cluster" {
			errs = append(errs, fmt.Errorf("%s: items[%d] is a %s, not a Cluster", path, i, c.Kind))
			continue
		}
		if fieldErrs := v1alpha1.ValidateCluster(c); len(fieldErrs) > 0 {
			errs = append(errs, fmt.Errorf("%s: cluster %s/%s: %w", path, c.Namespace, c.Name, fieldErrs.ToAggregate()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return StaticFleet(resolver, list.Items, opts), nil
}

func newFleet(resolver *Resolver, opts FleetOptions) *Fleet {
	if opts.Scheme == nil {
		opts.Scheme = defaultScheme
	}
	return &Fleet{resolver: resolver, opts: opts, members: map[types.NamespacedName]*Member{}}
}

// Start begins following the registry and returns once the Fleet holds every matching Cluster.
// The Fleet follows the registry until Stop is called or ctx ends.
func (f *Fleet) Start(ctx context.Context) error {
	if f.registry == nil {
		return nil // a static fleet
	}
	if f.cancel != nil {
		return errors.New("fleet already started")
	}
	ctx, f.cancel = context.WithCancel(ctx)
	var synced []cache.InformerSynced
	namespaces := f.opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		factory := externalversions.NewSharedInformerFactoryWithOptions(f.registry, 0,
			externalversions.WithNamespace(ns),
			externalversions.WithTweakListOptions(func(o *metav1.ListOptions) {
				if f.opts.Selector != nil {
					o.LabelSelector = f.opts.Selector.String()
				}
			}))
		informer := factory.Clusterregistry().V1alpha1().Clusters().Informer()
		reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { f.upsert(obj.(*v1alpha1.Cluster)) },
			UpdateFunc: func(_, obj any) { f.upsert(obj.(*v1alpha1.Cluster)) },
			DeleteFunc: f.onDelete,
		})
		if err != nil {
			return err
		}
		f.factories = append(f.factories, factory)
		// The handler's own sync, not the informer's: handlers run after the store is filled.
		synced = append(synced, reg.HasSynced)
		factory.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("fleet: the registry's Clusters did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Stop stops following the registry and waits for the Fleet's goroutines to end. Members keep
// working; their clients are not closed.
func (f *Fleet) Stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	for _, factory := range f.factories {
		factory.Shutdown()
	}
}

// Members returns the Fleet's members, ordered by namespace and name.
func (f *Fleet) Members() []*Member {
	f.mu.RLock()
	out := make([]*Member, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, m)
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Member) int {
		return cmp.Or(cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
	})
	return out
}

// Select returns the members whose Cluster labels match selector, ordered as Members.
func (f *Fleet) Select(selector labels.Selector) []*Member {
	return slices.DeleteFunc(f.Members(), func(m *Member) bool {
		return !selector.Matches(labels.Set(m.Cluster().Labels))
	})
}

// Member returns the member of that namespace and name, or nil.
func (f *Fleet) Member(namespace, name string) *Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.members[types.NamespacedName{Namespace: namespace, Name: name}]
}

// Len is the number of members.
func (f *Fleet) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.members)
}

func (f *Fleet) matches(c *v1alpha1.Cluster) bool {
	if len(f.opts.Namespaces) > 0 && !slices.Contains(f.opts.Namespaces, c.Namespace) {
		return false
	}
	return f.opts.Selector == nil || f.opts.Selector.Matches(labels.Set(c.Labels))
}

func (f *Fleet) upsert(c *v1alpha1.Cluster) {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	if !f.matches(c) {
		f.remove(key)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.members[key]; ok {
		m.setCluster(c)
		return
	}
	f.members[key] = newMember(c, f.resolver, f.opts.Scheme)
}

func (f *Fleet) onDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if c, ok := obj.(*v1alpha1.Cluster); ok {
		f.remove(types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
	}
}

func (f *Fleet) remove(key types.NamespacedName) {
	f.mu.Lock()
	_, had := f.members[key]
	delete(f.members, key)
	f.mu.Unlock()
	if had {
		f.resolver.Forget(key.Namespace, key.Name)
	}
}
