package reconcilequeue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Keys added before the controller starts reach its queue when it does, before what OnStart
// runs; keys added after go straight to it.
func TestKeysBeforeAndAfterTheStart(t *testing.T) {
	var q Queue
	early := types.NamespacedName{Namespace: "fleet", Name: "early"}
	q.Add(early)
	var lenAtStart int
	wq := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer wq.ShutDown()
	q.OnStart(func(context.Context) { lenAtStart = wq.Len() })
	require.Zero(t, wq.Len())

	require.NoError(t, q.Source().Start(t.Context(), wq))
	require.Equal(t, 1, lenAtStart, "OnStart ran before the early key was queued")
	late := types.NamespacedName{Namespace: "fleet", Name: "late"}
	q.Add(late)
	require.Equal(t, 2, wq.Len())
	for _, want := range []types.NamespacedName{early, late} {
		got, _ := wq.Get()
		require.Equal(t, want, got.NamespacedName)
		wq.Done(got)
	}
}

// A key added with a delay before the controller starts comes out once its delay, counted from
// when it was added, has passed, and not before; Len counts it until the start.
func TestAddAfterBeforeTheStart(t *testing.T) {
	var q Queue
	later := types.NamespacedName{Namespace: "fleet", Name: "later"}
	added := time.Now()
	q.AddAfter(later, 200*time.Millisecond)
	require.Equal(t, 1, q.Len())
	wq := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer wq.ShutDown()
	require.NoError(t, q.Source().Start(t.Context(), wq))
	require.Zero(t, q.Len(), "a delayed key was ready at the start")
	got, _ := wq.Get()
	require.Equal(t, later, got.NamespacedName)
	require.GreaterOrEqual(t, time.Since(added), 200*time.Millisecond, "the key came out before its delay")
	wq.Done(got)
}
