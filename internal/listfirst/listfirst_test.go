package listfirst

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

func TestWrapDeclaresNoWatchList(t *testing.T) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, nil },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewEmptyWatch(), nil
		},
	}
	require.False(t, watchlist.DoesClientNotSupportWatchListSemantics(lw))
	wrapped := Wrap(lw)
	require.True(t, watchlist.DoesClientNotSupportWatchListSemantics(wrapped))
	_, ok := wrapped.(cache.ListerWatcherWithContext)
	require.True(t, ok, "a ListWatch keeps its context-aware methods")

	var p plain
	other := Wrap(p)
	require.True(t, watchlist.DoesClientNotSupportWatchListSemantics(other))
	require.Equal(t, listerWatcher{p}, other, "any other ListerWatcher is wrapped as it is")
}

// plain is a ListerWatcher that is not a *cache.ListWatch.
type plain struct{}

func (plain) List(metav1.ListOptions) (runtime.Object, error)   { return nil, nil }
func (plain) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewEmptyWatch(), nil }
