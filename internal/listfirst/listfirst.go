// Package listfirst makes an informer start from a list, then watch, rather than from a watch
// that streams the initial state (client-go's WatchListClient, on by default): for a client
// caching many members, a list costs less to decode, and leaves no 16 KiB HTTP/2 data buffer
// behind on each member's watch stream afterwards (BenchmarkCaches, BenchmarkEngage).
package listfirst

import "k8s.io/client-go/tools/cache"

// Wrap is lw, declared to client-go's reflector as one that does not stream the initial state.
func Wrap(lw cache.ListerWatcher) cache.ListerWatcher {
	if l, ok := lw.(*cache.ListWatch); ok {
		return listWatch{l} // keeps the context-aware List and Watch the reflector prefers
	}
	return listerWatcher{lw}
}

type listWatch struct{ *cache.ListWatch }

func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }

type listerWatcher struct{ cache.ListerWatcher }

func (listerWatcher) IsWatchListSemanticsUnSupported() bool { return true }
