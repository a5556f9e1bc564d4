package delivery

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/election"
)

// setLeases are the Leases of a Controller with ControllerOptions.Lease: it acts on a cluster
// set's Releases only while it holds the Lease of that name in the set's own namespace. Where the
// Lease lives is so a property of the set, not of a controller's flags: a controller of one set
// (-n) and one of every set (-A), started with any --leader-elect-namespace, contend for the same
// Lease, and never both act on a set (two did once, each holding a Lease of its own). A
// controller of every set contends in each set it finds Releases in, from the first of them it
// is asked to work on.
type setLeases struct {
	base   election.Lease // Name, Identity and timings; Namespace is each set's
	leases coordinationv1.LeasesGetter
	log    logr.Logger
	// led is called when this Controller begins to lead set namespace: its Releases are
	// worked on again, since their keys were dropped while another led.
	led func(namespace string)

	mu   sync.Mutex
	ctx  context.Context // the Controller's run; nil before it
	sets map[string]*atomic.Bool
	wg   sync.WaitGroup
}

// start lets the sets' elections begin, until ctx ends; wait waits for them to end.
func (l *setLeases) start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctx = ctx
}

func (l *setLeases) wait() { l.wg.Wait() }

// leads reports whether this Controller holds the Lease of set namespace now, and begins to
// contend for it if it did not yet.
func (l *setLeases) leads(namespace string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	leading := l.sets[namespace]
	if leading == nil {
		if l.ctx == nil || l.ctx.Err() != nil {
			return false
		}
		leading = &atomic.Bool{}
		l.sets[namespace] = leading
		ctx := l.ctx
		l.wg.Go(func() { l.contend(ctx, namespace, leading) })
	}
	return leading.Load()
}

// contend takes part in set namespace's election until ctx ends, again after each lost lead.
func (l *setLeases) contend(ctx context.Context, namespace string, leading *atomic.Bool) {
	lease := l.base
	lease.Namespace = namespace
	for ctx.Err() == nil {
		err := election.Run(ctx, l.leases, lease, l.log, func(ctx context.Context) error {
			leading.Store(true)
			l.led(namespace)
			<-ctx.Done()
			return nil
		})
		leading.Store(false)
		if err != nil && ctx.Err() == nil && !errors.Is(err, election.ErrLostLeadership) {
			l.log.Error(err, "contending for a cluster set's Lease; trying again", "lease", namespace+"/"+lease.Name)
		}
		select {
		case <-ctx.Done():
		case <-time.After(lease.RetryPeriod):
		}
	}
}

// enqueueSet works on every Release of cluster set namespace again.
func (c *Controller) enqueueSet(namespace string) {
	for _, k := range c.releasesWhere(namespace, func(*v1alpha1.Release) bool { return true }) {
		c.queue.Add(k)
	}
}

// ledSet reports whether this Controller may act on the Releases of key's set: always without a
// Lease; with one, while it holds the set's.
func (c *Controller) ledSet(key types.NamespacedName) bool {
	return c.sets == nil || c.sets.leads(key.Namespace)
}
