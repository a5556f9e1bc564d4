package inlineinformer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
)

func configMap(name, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"v": v}}
}

// recorder records what a handler is told, in order.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf(format, args...))
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func (r *recorder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.add("add %s", obj.(*corev1.ConfigMap).Name) },
		UpdateFunc: func(old, obj any) {
			r.add("update %s %s->%s", obj.(*corev1.ConfigMap).Name, old.(*corev1.ConfigMap).Data["v"], obj.(*corev1.ConfigMap).Data["v"])
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			r.add("delete %s", obj.(*corev1.ConfigMap).Name)
		},
	}
}

// The informer stores and tells its handlers of every change in order, transformed; a handler
// added while it runs is first told of what is stored; a removed one hears no more; the setters
// that must come before Run refuse after it; and stopping leaves no goroutine.
func TestInformer(t *testing.T) {
	defer goleak.VerifyNone(t)
	source := fcache.NewFakeControllerSource()
	defer source.Shutdown()
	source.Add(configMap("a", "1"))
	source.Add(configMap("b", "1"))

	inf := New(source, &corev1.ConfigMap{}, 0, nil, "configmaps")
	require.NoError(t, inf.SetTransform(func(obj any) (any, error) {
		cm := obj.(*corev1.ConfigMap)
		cm.Labels = map[string]string{"transformed": "yes"}
		return cm, nil
	}))
	first := &recorder{}
	reg, err := inf.AddEventHandler(first.handler())
	require.NoError(t, err)
	require.False(t, inf.HasSynced())
	require.False(t, reg.HasSynced())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-inf.HasSyncedChecker().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the informer did not sync")
	}
	require.True(t, reg.HasSynced())
	require.ElementsMatch(t, []string{"add a", "add b"}, first.events(), "a handler has heard the first list once synced")
	require.ErrorIs(t, inf.SetTransform(nil), ErrStarted)
	require.ErrorIs(t, inf.SetWatchErrorHandlerWithContext(nil), ErrStarted)
	stored, ok, err := inf.GetIndexer().GetByKey("ns/a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "yes", stored.(*corev1.ConfigMap).Labels["transformed"])
	byNS, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, "ns")
	require.NoError(t, err)
	require.Len(t, byNS, 2)

	late := &recorder{}
	lateReg, err := inf.AddEventHandler(late.handler())
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"add a", "add b"}, late.events(), "told of what is stored before AddEventHandler returns")

	source.Modify(configMap("a", "2"))
	source.Add(configMap("c", "1"))
	require.Eventually(t, func() bool { return len(late.events()) == 4 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"update a 1->2", "add c"}, late.events()[2:])
	require.Equal(t, []string{"update a 1->2", "add c"}, first.events()[2:])

	require.NoError(t, inf.RemoveEventHandler(lateReg))
	require.Error(t, inf.RemoveEventHandler(nil))
	source.Delete(configMap("b", "1"))
	require.Eventually(t, func() bool { return len(first.events()) == 5 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, "delete b", first.events()[4])
	require.Len(t, late.events(), 4, "a removed handler hears no more")
	require.NotEmpty(t, inf.LastSyncResourceVersion())

	require.NoError(t, inf.AddIndexers(cache.Indexers{"v": func(obj any) ([]string, error) {
		return []string{obj.(*corev1.ConfigMap).Data["v"]}, nil
	}}))
	byV, err := inf.GetIndexer().ByIndex("v", "2")
	require.NoError(t, err)
	require.Len(t, byV, 1, "an index added late indexes what is stored")

	require.False(t, inf.IsStopped())
	cancel()
	<-done
	require.True(t, inf.IsStopped())
	_, err = inf.AddEventHandler(late.handler())
	require.Error(t, err)
	inf.RunWithContext(context.Background()) // returns at once: an informer runs once
}

// A resync period makes every handler hear every stored object again, as an update.
func TestInformerResyncs(t *testing.T) {
	defer goleak.VerifyNone(t)
	source := fcache.NewFakeControllerSource()
	defer source.Shutdown()
	source.Add(configMap("a", "1"))
	inf := NewShared(source, &corev1.ConfigMap{}, 50*time.Millisecond, nil)
	r := &recorder{}
	_, err := inf.AddEventHandlerWithOptions(r.handler(), cache.HandlerOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); inf.Run(ctx.Done()) }()
	require.Eventually(t, func() bool {
		ev := r.events()
		return len(ev) >= 2 && ev[1] == "update a 1->1"
	}, 10*time.Second, 5*time.Millisecond)
	require.True(t, inf.GetController().HasSynced())
	cancel()
	<-stopped
}

// A relist stores what is listed and deletes what is not, as a deletion that was not seen; only
// the first list is the initial one, and syncs the informer.
func TestRelist(t *testing.T) {
	inf := New(fcache.NewFakeControllerSource(), &corev1.ConfigMap{}, 0, nil, "configmaps")
	var tombstones []string
	var initial []bool
	r := &recorder{}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			initial = append(initial, isInInitialList)
			r.handler().OnAdd(obj, isInInitialList)
		},
		UpdateFunc: r.handler().OnUpdate,
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				tombstones = append(tombstones, tomb.Key)
			}
			r.handler().OnDelete(obj)
		},
	})
	require.NoError(t, err)
	q := &store{i: inf, closed: make(chan struct{})}
	require.NoError(t, q.Replace([]any{configMap("a", "1"), configMap("b", "1")}, "1"))
	require.True(t, inf.HasSynced())
	require.NoError(t, q.Replace([]any{configMap("a", "2"), configMap("c", "1")}, "2"))
	require.Equal(t, []string{"add a", "add b", "update a 1->2", "add c", "delete b"}, r.events())
	require.Equal(t, []string{"ns/b"}, tombstones)
	require.Equal(t, []bool{true, true, false}, initial)
	require.ElementsMatch(t, []string{"ns/a", "ns/c"}, inf.GetIndexer().ListKeys())

	q.Close()
	q.Close()
	_, err = q.Pop(nil)
	require.ErrorIs(t, err, cache.ErrFIFOClosed)
}
