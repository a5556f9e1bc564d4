package fleetcache

import (
	"fmt"
	"path"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/internal/inlineinformer"
	"github.com/cluster-registry/sdk/internal/intern"
)

// KindOptions shape the caches of one kind.
type KindOptions struct {
	// Transform changes each object before it is cached, after managed fields are dropped: set
	// to nil what the tool does not read (a Node's images, a Pod's env) to keep the caches small.
	// It may change the object it is given and must return an object of the same type.
	Transform cache.TransformFunc
	// KeepManagedFields keeps metadata.managedFields, which every cache drops by default.
	KeepManagedFields bool
	// Indexers are added to every member's cache of the kind; see also Kind.AddIndexers.
	Indexers cache.Indexers
	// LabelSelector, if set, caches only the objects whose labels match it (the members filter
	// them, so that what they do not send costs nothing here). A kind cached with two selectors
	// is two Kinds.
	LabelSelector string
}

// Kind is one kind's caches on every member of a Cache. T is the type its objects have in the
// caches: a typed object such as *corev1.Node, *unstructured.Unstructured (Dynamic), or
// *metav1.PartialObjectMetadata (Metadata).
type Kind[T runtime.Object] struct {
	c    *Cache
	id   kindID
	seq  int
	name string // id's String, made once rather than per member
	opts KindOptions
	// source is how the kind is listed and watched on a member, and the type of its objects.
	source func(*memberClients) (cache.ListerWatcher, runtime.Object, error)

	mu       sync.Mutex
	handlers []func(Event[T])
	indexers cache.Indexers

	// gen is Generation.
	gen atomic.Uint64
}

// kindID names a kind in a Cache: its resource and how it is cached.
type kindID struct {
	gvr      schema.GroupVersionResource
	mode     string
	selector string
}

func (id kindID) String() string {
	s := id.gvr.Resource
	if id.gvr.Group != "" {
		s += "." + id.gvr.Group
	}
	if id.selector != "" {
		return fmt.Sprintf("%s (%s, %s, %s)", s, id.gvr.Version, id.mode, id.selector)
	}
	return fmt.Sprintf("%s (%s, %s)", s, id.gvr.Version, id.mode)
}

// kindRunner is a Kind of any T, as the Cache starts it on members.
type kindRunner interface {
	startOn(mc *memberCaches)
	order() int
	// changed moves the kind's Generation on: a member's caches went.
	changed()
}

var kindSeq atomic.Int64

// Typed caches a built-in kind, decoded into client-go's types as its informer factory would:
// Typed[*corev1.Node](c, corev1.SchemeGroupVersion.WithResource("nodes"), opts). T must be the
// type client-go's informer for gvr holds. Each member lists and watches the kind through a REST
// client of the kind's API group alone (protobuf where the member serves it), not a clientset of
// every group.
func Typed[T runtime.Object](c *Cache, gvr schema.GroupVersionResource, opts KindOptions) (*Kind[T], error) {
	// A factory without a client builds informers without calling it: this checks that the
	// factory knows the resource before any member is asked.
	if _, err := informers.NewSharedInformerFactory(nil, 0).ForResource(gvr); err != nil {
		return nil, fmt.Errorf("fleetcache: %w", err)
	}
	example, err := typedExample[T](gvr)
	if err != nil {
		return nil, err
	}
	return register[T](c, kindID{gvr, "typed", opts.LabelSelector}, opts, func(cl *memberClients) (cache.ListerWatcher, runtime.Object, error) {
		rc, err := cl.typedFor(gvr.GroupVersion())
		if err != nil {
			return nil, nil, err
		}
		return typedListWatch(rc, gvr.Resource), example, nil
	})
}

// Dynamic caches any resource, custom resources included, as unstructured objects.
func Dynamic(c *Cache, gvr schema.GroupVersionResource, opts KindOptions) (*Kind[*unstructured.Unstructured], error) {
	return register[*unstructured.Unstructured](c, kindID{gvr, "dynamic", opts.LabelSelector}, opts, func(cl *memberClients) (cache.ListerWatcher, runtime.Object, error) {
		dyn, err := cl.Dynamic()
		if err != nil {
			return nil, nil, err
		}
		ri := dyn.Resource(gvr)
		return listWatch(ri.List, ri.Watch), &unstructured.Unstructured{}, nil
	})
}

// Metadata caches only the metadata of a resource's objects (names, labels, annotations, owners),
// for tools that count or find objects without reading them: a fraction of the memory of the
// whole objects.
func Metadata(c *Cache, gvr schema.GroupVersionResource, opts KindOptions) (*Kind[*metav1.PartialObjectMetadata], error) {
	return register[*metav1.PartialObjectMetadata](c, kindID{gvr, "metadata", opts.LabelSelector}, opts, func(cl *memberClients) (cache.ListerWatcher, runtime.Object, error) {
		meta, err := cl.Metadata()
		if err != nil {
			return nil, nil, err
		}
		ri := meta.Resource(gvr)
		return listWatch(ri.List, ri.Watch), &metav1.PartialObjectMetadata{}, nil
	})
}

// register adds the kind to the Cache and starts it on every member there is; asking again for
// the same kind returns the same Kind.
func register[T runtime.Object](c *Cache, id kindID, opts KindOptions, source func(*memberClients) (cache.ListerWatcher, runtime.Object, error)) (*Kind[T], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if existing, ok := c.kinds[id]; ok {
		k, ok := existing.(*Kind[T])
		if !ok {
			return nil, fmt.Errorf("fleetcache: %s is already cached as %T", id, existing)
		}
		return k, nil
	}
	indexers := cache.Indexers{}
	for name, fn := range opts.Indexers {
		indexers[name] = fn
	}
	k := &Kind[T]{c: c, id: id, seq: int(kindSeq.Add(1)), name: id.String(), opts: opts, source: source, indexers: indexers}
	c.kinds[id] = k
	for _, mc := range c.caches {
		k.startOn(mc)
	}
	return k, nil
}

func (k *Kind[T]) order() int { return k.seq }

func (k *Kind[T]) changed() { k.gen.Add(1) }

// String names the kind: its resource, version and how it is cached.
func (k *Kind[T]) String() string { return k.name }

// startOn starts the kind's informer on a member, in a goroutine of the member's caches: the
// member's clients may first have to wait for its credentials.
func (k *Kind[T]) startOn(mc *memberCaches) {
	st := newMemberInformer(&k.gen)
	mc.mu.Lock()
	mc.informers[k.id] = st
	mc.routes = append(mc.routes, route{suffix: "/" + path.Join(k.id.gvr.Version, k.id.gvr.Resource), st: st})
	mc.mu.Unlock()
	mc.done.Go(func() {
		cl, err := mc.clientsFor(st)
		if err != nil {
			return // stopped
		}
		lw, example, err := k.source(cl)
		if err != nil {
			st.fail(fmt.Errorf("member %s: %s: %w", mc.member, k, err))
			return
		}
		if k.opts.LabelSelector != "" {
			lw = selected(lw, k.opts.LabelSelector)
		}
		inf, err := k.newInformer(mc, st, lw, example)
		if err != nil {
			st.fail(fmt.Errorf("member %s: %s: %w", mc.member, k, err))
			return
		}
		synced := inf.HasSyncedChecker().Done() // a channel: no polling per member
		mc.done.Go(func() {
			select {
			case <-synced:
				st.synced()
			case <-mc.ctx.Done():
			}
		})
		inf.RunWithContext(mc.ctx)
	})
}

// newInformer builds the member's informer of the kind (handlers called in line: package
// inlineinformer), with the kind's indexers and handlers, and makes it the one its status and
// listers see.
func (k *Kind[T]) newInformer(mc *memberCaches, st *memberInformer, lw cache.ListerWatcher, example runtime.Object) (*inlineinformer.Informer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	inf := inlineinformer.New(lw, example, 0, k.indexers, k.name)
	if err := inf.SetTransform(k.transform); err != nil {
		return nil, err
	}
	if err := inf.SetWatchErrorHandlerWithContext(watchErrorHandler(st, cache.DefaultWatchErrorHandler)); err != nil {
		return nil, err
	}
	// First of the handlers, each called once the change is stored: a reader who sees the new
	// Generation finds the change in the cache.
	if _, err := inf.AddEventHandler(handlerFor(mc, func(Event[T]) { k.gen.Add(1) })); err != nil {
		return nil, err
	}
	for _, fn := range k.handlers {
		if _, err := inf.AddEventHandler(handlerFor(mc, fn)); err != nil {
			return nil, err
		}
	}
	st.mu.Lock()
	st.informer = inf
	st.mu.Unlock()
	k.gen.Add(1)
	return inf, nil
}

// transform drops managed fields, applies the kind's own transform, then shares the strings of
// the object's metadata that repeat (package intern).
func (k *Kind[T]) transform(obj any) (any, error) {
	if !k.opts.KeepManagedFields {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
	}
	if k.opts.Transform != nil {
		var err error
		if obj, err = k.opts.Transform(obj); err != nil {
			return nil, err
		}
	}
	intern.Meta(obj)
	return obj, nil
}

// addIndexers adds the indexers the informer lacks.
func addIndexers(inf cache.SharedIndexInformer, indexers cache.Indexers) error {
	have := inf.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := have[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return inf.AddIndexers(missing)
}

// AddIndexers adds indexers to the kind's cache on every member, current and future, for
// ByIndex and ByIndexAll.
func (k *Kind[T]) AddIndexers(indexers cache.Indexers) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, fn := range indexers {
		if _, ok := k.indexers[name]; ok {
			return fmt.Errorf("fleetcache: %s already has an index %q", k, name)
		}
		k.indexers[name] = fn
	}
	for _, mc := range k.c.memberList() {
		if st := mc.informer(k.id); st != nil {
			if inf, _ := st.get(); inf != nil {
				if err := addIndexers(inf, indexers); err != nil && mc.ctx.Err() == nil {
					return fmt.Errorf("fleetcache: %s on member %s: %w", k, mc.member, err)
				}
			}
		}
	}
	return nil
}
