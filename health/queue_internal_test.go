package health

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/internal/reconcilequeue"
)

// probeQueue gives c a probe queue on controller-runtime's priority queue, as the probe
// controller's Start makes it, for a test that takes keys out itself (take).
func probeQueue(t *testing.T, c *Controller) *takenQueue {
	t.Helper()
	wq := priorityqueue.New[reconcile.Request]("health-test")
	t.Cleanup(wq.ShutDown)
	c.probes = &reconcilequeue.Queue{}
	require.NoError(t, c.probes.Source().Start(t.Context(), wq))
	return &takenQueue{wq}
}

// takenQueue is a probe queue a test takes keys out of.
type takenQueue struct {
	wq priorityqueue.PriorityQueue[reconcile.Request]
}

// get waits for the next key, as a worker of the controller would.
func (q *takenQueue) get() types.NamespacedName {
	req, _ := q.wq.Get()
	return req.NamespacedName
}

// done says key's reconcile is over.
func (q *takenQueue) done(key types.NamespacedName) {
	q.wq.Done(reconcile.Request{NamespacedName: key})
}
