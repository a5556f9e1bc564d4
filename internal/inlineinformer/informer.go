package inlineinformer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/internal/listfirst"
)

// ErrStarted is returned by the setters that must come before Run.
var ErrStarted = errors.New("inlineinformer: the informer has already started")

// Informer is a cache.SharedIndexInformer with handlers called in line. All handlers resync at
// the informer's own resync period, if any; periods asked for by a handler are not honoured.
type Informer struct {
	lw         cache.ListerWatcher
	objectType runtime.Object
	resync     time.Duration
	name       string
	indexer    cache.Indexer
	synced     chan struct{} // closed once the first list has been stored and handled; under dispatch

	// dispatch is held while handlers are called, and guards them: a handler added while the
	// informer runs is told of what is stored, then of every change after it, never at once.
	dispatch sync.Mutex
	handlers []*registration

	mu           sync.Mutex // guards what follows
	transform    cache.TransformFunc
	onWatchError cache.WatchErrorHandlerWithContext
	ctrl         cache.Controller
	started      bool
	stopped      bool
}

var _ cache.SharedIndexInformer = (*Informer)(nil)

// New is an informer of lw's objects, of objectType's type, with a namespace index and indexers.
// name is its name in client-go's logs.
func New(lw cache.ListerWatcher, objectType runtime.Object, resync time.Duration, indexers cache.Indexers, name string) *Informer {
	if name == "" {
		name = fmt.Sprintf("%T", objectType)
	}
	all := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	for n, fn := range indexers {
		all[n] = fn
	}
	return &Informer{
		lw:         listfirst.Wrap(lw),
		objectType: objectType,
		resync:     resync,
		name:       name,
		indexer:    cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, all),
		synced:     make(chan struct{}),
	}
}

// NewShared has the signature of cache.NewSharedIndexInformer, for controller-runtime's
// cache.Options.NewInformer.
func NewShared(lw cache.ListerWatcher, objectType runtime.Object, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return New(lw, objectType, resync, indexers, "")
}

// RunWithContext lists and watches until ctx ends. It returns at once if the informer ran before.
func (i *Informer) RunWithContext(ctx context.Context) {
	i.mu.Lock()
	if i.started {
		i.mu.Unlock()
		return
	}
	i.started = true
	i.ctrl = cache.New(&cache.Config{
		Queue:                        &store{i: i, closed: make(chan struct{})},
		ListerWatcher:                i.lw,
		ObjectType:                   i.objectType,
		ObjectDescription:            i.name,
		FullResyncPeriod:             i.resync,
		WatchErrorHandlerWithContext: i.onWatchError,
	})
	ctrl := i.ctrl
	i.mu.Unlock()

	ctrl.RunWithContext(ctx)
	i.mu.Lock()
	i.stopped = true
	i.mu.Unlock()
}

// Run is RunWithContext until stopCh is closed.
func (i *Informer) Run(stopCh <-chan struct{}) { i.RunWithContext(wait.ContextForChannel(stopCh)) }

// store is what the informer's reflector writes to: each change is stored and handed to the
// handlers at once, in the reflector's goroutine, rather than queued in a FIFO for another
// goroutine (whose backing array, sized by the first list, outlived it on every member). It is
// the controller's Queue only in name: nothing is ever popped.
type store struct {
	i         *Informer
	closed    chan struct{}
	closeOnce sync.Once
}

func (q *store) Add(obj any) error    { return q.i.upsert(obj, false) }
func (q *store) Update(obj any) error { return q.i.upsert(obj, false) }
func (q *store) Delete(obj any) error { return q.i.remove(obj) }
func (q *store) Replace(list []any, _ string) error {
	return q.i.replace(list)
}
func (q *store) Resync() error { q.i.resyncAll(); return nil }

// Pop waits for Close: changes are handled as they are stored, so there is never one to pop.
func (q *store) Pop(cache.PopProcessFunc) (any, error) {
	<-q.closed
	return nil, cache.ErrFIFOClosed
}

func (q *store) HasSynced() bool                     { return q.i.HasSynced() }
func (q *store) HasSyncedChecker() cache.DoneChecker { return q.i.HasSyncedChecker() }
func (q *store) Close()                              { q.closeOnce.Do(func() { close(q.closed) }) }

// transformed is obj after the informer's transform, if any.
func (i *Informer) transformed(obj any) (any, error) {
	if _, tomb := obj.(cache.DeletedFinalStateUnknown); tomb || i.transform == nil {
		return obj, nil
	}
	return i.transform(obj)
}

// upsert stores obj and tells the handlers: an update if it was stored, an add if not.
func (i *Informer) upsert(obj any, isInInitialList bool) error {
	obj, err := i.transformed(obj)
	if err != nil {
		return err
	}
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	return i.upsertLocked(obj, isInInitialList)
}

func (i *Informer) upsertLocked(obj any, isInInitialList bool) error {
	old, exists, err := i.indexer.Get(obj)
	if err == nil && exists {
		if err := i.indexer.Update(obj); err != nil {
			return err
		}
		for _, r := range i.handlers {
			r.handler.OnUpdate(old, obj)
		}
		return nil
	}
	if err := i.indexer.Add(obj); err != nil {
		return err
	}
	for _, r := range i.handlers {
		r.handler.OnAdd(obj, isInInitialList)
	}
	return nil
}

// remove deletes obj and tells the handlers.
func (i *Informer) remove(obj any) error {
	obj, err := i.transformed(obj)
	if err != nil {
		return err
	}
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	if err := i.indexer.Delete(obj); err != nil {
		return err
	}
	for _, r := range i.handlers {
		r.handler.OnDelete(obj)
	}
	return nil
}

// replace stores a list: each object is added or updated, and what is stored but not listed is
// deleted, as a DeletedFinalStateUnknown (its deletion was not seen). The first list syncs the
// informer.
func (i *Informer) replace(list []any) error {
	objs := make([]any, 0, len(list))
	for _, obj := range list {
		t, err := i.transformed(obj)
		if err != nil {
			return err
		}
		objs = append(objs, t)
	}
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	initial := !i.HasSynced()
	listed := make(map[string]struct{}, len(objs))
	for _, obj := range objs {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		listed[key] = struct{}{}
		if err := i.upsertLocked(obj, initial); err != nil {
			return err
		}
	}
	for _, key := range i.indexer.ListKeys() {
		if _, ok := listed[key]; ok {
			continue
		}
		old, exists, err := i.indexer.GetByKey(key)
		if err != nil || !exists {
			continue
		}
		if err := i.indexer.Delete(old); err != nil {
			return err
		}
		for _, r := range i.handlers {
			r.handler.OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: old})
		}
	}
	if initial {
		close(i.synced)
	}
	return nil
}

// resyncAll tells the handlers of every stored object again, as an update.
func (i *Informer) resyncAll() {
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	for _, obj := range i.indexer.List() {
		for _, r := range i.handlers {
			r.handler.OnUpdate(obj, obj)
		}
	}
}

// AddEventHandler adds a handler. If the informer runs, the handler is first told of every
// object stored, as Added, in the caller's goroutine, then of every change after them. It must
// not be called from one of the informer's own handlers.
func (i *Informer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	if i.IsStopped() {
		return nil, fmt.Errorf("inlineinformer: %s has stopped", i.name)
	}
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	r := &registration{informer: i, handler: handler}
	i.handlers = append(i.handlers, r)
	for _, obj := range i.indexer.List() {
		handler.OnAdd(obj, true)
	}
	return r, nil
}

// AddEventHandlerWithResyncPeriod is AddEventHandler: the handler resyncs at the informer's period.
func (i *Informer) AddEventHandlerWithResyncPeriod(handler cache.ResourceEventHandler, _ time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(handler)
}

// AddEventHandlerWithOptions is AddEventHandler: the handler resyncs at the informer's period.
func (i *Informer) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, _ cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(handler)
}

// RemoveEventHandler stops calling a handler.
func (i *Informer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok || r.informer != i {
		return fmt.Errorf("inlineinformer: %T is not a registration of %s", handle, i.name)
	}
	i.dispatch.Lock()
	defer i.dispatch.Unlock()
	i.handlers = slices.DeleteFunc(i.handlers, func(x *registration) bool { return x == r })
	return nil
}

// GetStore is the informer's store.
func (i *Informer) GetStore() cache.Store { return i.indexer }

// GetIndexer is the informer's store, with its indexes.
func (i *Informer) GetIndexer() cache.Indexer { return i.indexer }

// AddIndexers adds indexes, indexing what is stored already.
func (i *Informer) AddIndexers(indexers cache.Indexers) error { return i.indexer.AddIndexers(indexers) }

// GetController is a view of the informer as a Controller; running it does nothing, as with
// client-go's shared informer.
func (i *Informer) GetController() cache.Controller { return controllerView{i} }

// HasSynced says whether the first list has been stored and handled.
func (i *Informer) HasSynced() bool {
	select {
	case <-i.synced:
		return true
	default:
		return false
	}
}

// HasSyncedChecker is closed once the first list has been stored and handled.
func (i *Informer) HasSyncedChecker() cache.DoneChecker { return syncedChecker{i} }

// LastSyncResourceVersion is the resourceVersion the informer last saw.
func (i *Informer) LastSyncResourceVersion() string {
	i.mu.Lock()
	ctrl := i.ctrl
	i.mu.Unlock()
	if ctrl == nil {
		return ""
	}
	return ctrl.LastSyncResourceVersion()
}

// SetWatchErrorHandler sets what is told of failed lists and watches, before Run.
func (i *Informer) SetWatchErrorHandler(handler cache.WatchErrorHandler) error {
	return i.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) { handler(r, err) })
}

// SetWatchErrorHandlerWithContext sets what is told of failed lists and watches, before Run.
func (i *Informer) SetWatchErrorHandlerWithContext(handler cache.WatchErrorHandlerWithContext) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.started {
		return ErrStarted
	}
	i.onWatchError = handler
	return nil
}

// SetTransform sets how each object is changed before it is stored, before Run.
func (i *Informer) SetTransform(transform cache.TransformFunc) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.started {
		return ErrStarted
	}
	i.transform = transform
	return nil
}

// IsStopped says whether the informer ran and stopped.
func (i *Informer) IsStopped() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.stopped
}

// registration is a handler added to an informer. Handlers are called in line, so a handler has
// been told of everything stored when the informer has synced.
type registration struct {
	informer *Informer
	handler  cache.ResourceEventHandler
}

func (r *registration) HasSynced() bool                     { return r.informer.HasSynced() }
func (r *registration) HasSyncedChecker() cache.DoneChecker { return r.informer.HasSyncedChecker() }

type syncedChecker struct{ i *Informer }

func (c syncedChecker) Name() string          { return c.i.name }
func (c syncedChecker) Done() <-chan struct{} { return c.i.synced }

// controllerView is the informer as client-go's Controller interface.
type controllerView struct{ i *Informer }

func (controllerView) RunWithContext(context.Context)        {}
func (controllerView) Run(<-chan struct{})                   {}
func (c controllerView) HasSynced() bool                     { return c.i.HasSynced() }
func (c controllerView) HasSyncedChecker() cache.DoneChecker { return c.i.HasSyncedChecker() }
func (c controllerView) LastSyncResourceVersion() string     { return c.i.LastSyncResourceVersion() }
