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
