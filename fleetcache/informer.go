package fleetcache

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// kindInformer is one kind's cache on one member: client-go's low-level controller (a reflector
// filling a FIFO, drained into an indexer) with the kind's handlers called in line, as each change
// is stored.
//
// It is not a SharedIndexInformer, which would hand every change to each handler through a ring
// of pending notifications allocated at 1,024 entries (16 KiB) per handler and member: after the
// member's connection, that ring was the largest fixed cost of a member's cache. Called in line,
// a slow handler delays its own member's cache and events, as it delayed that member's events
// before, and nothing is held for it in between.
type kindInformer struct {
	indexer cache.Indexer
	ctrl    cache.Controller

	// mu serializes handler calls with the replay of the cache to a handler added while the
	// informer runs, so that each handler sees every object once as Added, then its changes in order.
	mu       sync.Mutex
	handlers []cache.ResourceEventHandler
}

// informerOptions are what a kindInformer is built from.
type informerOptions struct {
	name         string // the kind, for client-go's logs
	listWatch    cache.ListerWatcher
	objectType   runtime.Object
	indexers     cache.Indexers
	transform    cache.TransformFunc
	onWatchError cache.WatchErrorHandlerWithContext
	handlers     []cache.ResourceEventHandler
}

func newKindInformer(o informerOptions) *kindInformer {
	indexers := namespaceIndex()
	for name, fn := range o.indexers {
		indexers[name] = fn
	}
	ki := &kindInformer{
		indexer:  cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers),
		handlers: o.handlers,
	}
	fifo := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		Name:         o.name,
		KeyFunction:  cache.MetaNamespaceKeyFunc,
		KnownObjects: ki.indexer, // a relist turns what is gone into deletions
		Transformer:  o.transform,
	})
	ki.ctrl = cache.New(&cache.Config{
		Queue:                        fifo,
		ListerWatcher:                o.listWatch,
		ObjectType:                   o.objectType,
		ObjectDescription:            o.name,
		Process:                      ki.process,
		WatchErrorHandlerWithContext: o.onWatchError,
	})
	return ki
}

// run lists and watches until ctx ends.
func (ki *kindInformer) run(ctx context.Context) { ki.ctrl.RunWithContext(ctx) }

// synced is closed once the first list has been stored and handed to the handlers.
func (ki *kindInformer) synced() <-chan struct{} { return ki.ctrl.HasSyncedChecker().Done() }

// process stores a popped object's changes, oldest first, and tells the handlers of each. The
// FIFO is built without atomic events, so only per-object deltas come.
func (ki *kindInformer) process(obj any, _ bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return fmt.Errorf("fleetcache: the FIFO popped a %T, not Deltas", obj)
	}
	ki.mu.Lock()
	defer ki.mu.Unlock()
	for _, d := range deltas {
		switch d.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			old, exists, err := ki.indexer.Get(d.Object)
			if err == nil && exists {
				if err := ki.indexer.Update(d.Object); err != nil {
					return err
				}
				for _, h := range ki.handlers {
					h.OnUpdate(old, d.Object)
				}
				continue
			}
			if err := ki.indexer.Add(d.Object); err != nil {
				return err
			}
			for _, h := range ki.handlers {
				h.OnAdd(d.Object, false)
			}
		case cache.Deleted:
			if err := ki.indexer.Delete(d.Object); err != nil {
				return err
			}
			for _, h := range ki.handlers {
				h.OnDelete(d.Object)
			}
		}
	}
	return nil
}

// addHandler adds a handler to a running informer: it is first told of every object cached, as
// Added, then of every change after them. It must not be called from a handler of the same
// informer.
func (ki *kindInformer) addHandler(h cache.ResourceEventHandler) {
	ki.mu.Lock()
	defer ki.mu.Unlock()
	ki.handlers = append(ki.handlers, h)
	for _, obj := range ki.indexer.List() {
		h.OnAdd(obj, false)
	}
}

// addIndexers adds the indexers the cache lacks, indexing what it holds.
func (ki *kindInformer) addIndexers(indexers cache.Indexers) error {
	have := ki.indexer.GetIndexers()
	missing := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := have[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return ki.indexer.AddIndexers(missing)
}

// watchListUnsupported is a ListerWatcher that starts from a list, not from a watch streaming
// the initial state: a list costs the member's cache less to decode, and leaves no 16 KiB
// HTTP/2 buffer behind on the watch that follows it.
type watchListUnsupported struct{ *cache.ListWatch }

func (watchListUnsupported) IsWatchListSemanticsUnSupported() bool { return true }
