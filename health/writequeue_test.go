package health

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned/fake"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// queueTestController is a Controller over fakes whose registry answers status writes with
// patch, probing every 50 ms with one worker (and so one writer).
func queueTestController(t *testing.T, patch clienttesting.ReactionFunc) *Controller {
	return fakeController(t, patch, Options{Interval: 50 * time.Millisecond, UnknownAfter: time.Hour, Concurrency: 1})
}

// fakeController is a Controller of opts, with its defaults, over a fake registry whose status
// writes patch answers, ready for work: its queues, metrics and writer made as Run makes them.
func fakeController(t *testing.T, patch clienttesting.ReactionFunc, opts Options) *Controller {
	t.Helper()
	registry := fake.NewClientset()
	registry.PrependReactor("patch", "clusters", patch)
	resolver, err := access.NewResolver(access.ResolverOptions{})
	require.NoError(t, err)
	opts.Registry, opts.Kube, opts.Resolver = registry, kubefake.NewClientset(), resolver
	opts, err = opts.withDefaults()
	require.NoError(t, err)
	c := &Controller{opts: opts, members: map[types.NamespacedName]*tracked{}}
	require.NoError(t, c.loops())
	c.metrics, err = newMetrics(nil)
	require.NoError(t, err)
	c.writer, err = newWriter(t.Context(), &c.opts)
	require.NoError(t, err)
	t.Cleanup(c.writer.shutdown)
	return c
}

// track adds a member with no credentials (each probe of it fails the same way), due now.
func (c *Controller) trackForTest(name string) *tracked {
	m := multicluster.NewMember(&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}, multicluster.Clients{})
	t := &tracked{member: m, added: time.Now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members[m.Name()] = t
	c.schedule(t, time.Now())
	return t
}

// heldWrites is a registry's answer to status writes that holds each until release, and says on
// writing when one has come.
type heldWrites struct {
	writing chan struct{}
	release func()
	patch   clienttesting.ReactionFunc
}

// holdWrites holds the test's status writes until release, or the test's end.
func holdWrites(t *testing.T) *heldWrites {
	released := make(chan struct{})
	var once sync.Once
	h := &heldWrites{writing: make(chan struct{}, 1), release: func() { once.Do(func() { close(released) }) }}
	h.patch = func(clienttesting.Action) (bool, runtime.Object, error) {
		select {
		case h.writing <- struct{}{}:
		default:
		}
		<-released
		return true, &v1alpha1.Cluster{}, nil
	}
	t.Cleanup(h.release)
	return h
}

// working runs c's work until the returned stop, which ends it, lets held writes go, and waits
// for its workers.
func working(c *Controller, held *heldWrites) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	worked := make(chan struct{})
	go func() { defer close(worked); _ = c.work(ctx) }()
	return func() {
		cancel()
		if held != nil {
			held.release()
		}
		<-worked
	}
}

// firstWrite waits for the first status write to reach the registry.
func (h *heldWrites) firstWrite(t *testing.T) {
	t.Helper()
	select {
	case <-h.writing:
	case <-time.After(10 * time.Second):
		t.Fatal("no status was written")
	}
}

// probedSince says whether t was probed after when.
func (c *Controller) probedSince(t *tracked, when time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.state.lastProbe.After(when)
}

// A status write that waits on the registry holds up no probe: the probes' workers queue their
// writes for writers of their own. With one worker, a write the registry held used to stop all
// probing until it was answered; when the registry was slow, members were probed late, each
// late probe was due a heartbeat write, and the registry slowed further.
func TestSlowStatusWriteHoldsUpNoProbe(t *testing.T) {
	held := holdWrites(t)
	c := queueTestController(t, held.patch)
	a := c.trackForTest("a")
	b := c.trackForTest("b")
	stop := working(c, held)
	defer stop()
	held.firstWrite(t)
	since := time.Now()
	require.Eventually(t, func() bool { return c.probedSince(a, since) && c.probedSince(b, since) }, 10*time.Second, 10*time.Millisecond,
		"members were not probed while a status write was held")
}

// A status write the registry refuses is made again after the next probe: the member's state goes
// back to what the registry holds, not what was queued.
func TestRefusedStatusWriteIsMadeAgain(t *testing.T) {
	var patches atomic.Int32
	c := queueTestController(t, func(clienttesting.Action) (bool, runtime.Object, error) {
		if patches.Add(1) == 1 {
			return true, nil, errors.New("the registry is busy")
		}
		return true, &v1alpha1.Cluster{}, nil
	})
	a := c.trackForTest("a")
	stop := working(c, nil)
	defer stop()
	written := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return a.confirmed.written != nil
	}
	require.Eventually(t, written, 10*time.Second, 10*time.Millisecond, "the refused write was not made again")
	require.GreaterOrEqual(t, patches.Load(), int32(2))
	c.mu.Lock()
	require.Equal(t, v1alpha1.ReasonCredentialsUnavailable, a.confirmed.written.Reason)
	require.Equal(t, a.confirmed, a.state.writtenStatus, "the state is what was written")
	c.mu.Unlock()
}

// When more status writes wait than there are probe workers (a whole fleet changed at once), the
// workers write in line beside the writers, so that the burst is written as fast as the
// registry takes it. With writers alone, the first pass of 10,000 members took twice as long.
func TestBackloggedWritesAreMadeByWorkersToo(t *testing.T) {
	held := holdWrites(t)
	c := queueTestController(t, held.patch)
	var members []*tracked
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		members = append(members, c.trackForTest(name))
	}
	stop := working(c, held)
	defer stop()
	// A probe of a member without credentials ends at once: one in flight this long is the
	// worker writing in line, held by the registry (the fake registry answers one call at a
	// time, so that the writes themselves cannot be counted in flight).
	writingInLine := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, t := range members {
			if !t.probing.IsZero() && time.Since(t.probing) > 300*time.Millisecond {
				return true
			}
		}
		return false
	}
	require.Eventually(t, writingInLine, 10*time.Second, 10*time.Millisecond,
		"the one worker did not write in line while writes waited for the one writer")
}

// Heartbeats wait for the writers however many are backlogged: a worker that wrote them too left
// members unprobed, each of which was then due a heartbeat of its own.
func TestBackloggedHeartbeatsHoldUpNoProbe(t *testing.T) {
	held := holdWrites(t)
	c := queueTestController(t, held.patch)
	var members []*tracked
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		m := c.trackForTest(name)
		// Written before, as each probe will find it, and due its heartbeat.
		m.state.written = &metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonCredentialsUnavailable}
		m.state.lastWrite = time.Now().Add(-c.opts.Heartbeat - time.Second)
		m.confirmed = m.state.writtenStatus
		members = append(members, m)
	}
	stop := working(c, held)
	defer stop()
	held.firstWrite(t)
	since := time.Now()
	require.Eventually(t, func() bool {
		for _, m := range members {
			if !c.probedSince(m, since) {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "members were not probed while heartbeats waited")
}
