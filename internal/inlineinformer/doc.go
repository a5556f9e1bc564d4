// Package inlineinformer is a cache.SharedIndexInformer whose handlers are called in line, as each
// change is stored (in the reflector's goroutine, with no FIFO in between), for clients that keep
// one informer per kind on each of many members.
//
// client-go's shared informer hands every change to each handler through a queue of its own (two
// goroutines, and a ring of pending notifications allocated at 1,024 entries, 16 KiB, per handler),
// so that a slow handler does not hold up the others. A handler that only enqueues a key (a
// controller-runtime source, a fleetcache handler) never needs that; across 1,000 members the
// rings alone were 16 MiB. Here a handler delays its own informer's store and the handlers after
// it, nothing else.
//
// Every informer also starts from a list, then watches (package listfirst).
package inlineinformer
