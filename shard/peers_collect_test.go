package shard_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// A replica that crashed (SIGKILL, OOM) leaves its Lease behind, and nothing deleted it: every
// killed pod left one for good. A live replica collects a peer's Lease once it has stayed
// expired and unchanged for CollectAfter, and says so in its log; it never collects one that is
// still being renewed, even by a replica whose clock makes its renewals look old, nor another
// group's, nor one expired for less than CollectAfter.
func TestPeersCollectCrashedReplicasLeases(t *testing.T) {
	defer goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...)
	ctx := t.Context()
	ns := fleettest.NewSet(t, lf)
	leases := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoordinationV1().Leases(ns)
	lease := func(name, group string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shard.GroupLabel: group}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), RenewTime: &metav1.MicroTime{Time: renewed},
				LeaseDurationSeconds: ptr.To(int32(1))},
		}
	}
	longAgo := time.Now().Add(-time.Hour)
	for _, l := range []*coordinationv1.Lease{
		lease("health-crashed", "health", longAgo),
		lease("health-skewed", "health", longAgo),      // renewed below, by a clock an hour behind
		lease("rotation-crashed", "rotation", longAgo), // another group's
	} {
		_, err := leases.Create(ctx, l, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	defer renewSkewed(ctx, leases)()

	var mu sync.Mutex
	var logs []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, prefix+" "+args)
	}, funcr.Options{})
	const collectAfter = 2 * time.Second
	peers, err := shard.NewPeers(kubernetes.NewForConfigOrDie(lf.Registry.Config).CoordinationV1(), shard.PeerOptions{
		Namespace: ns, Group: "health", Identity: "live", LeaseDuration: time.Second, RenewPeriod: 200 * time.Millisecond,
		CollectAfter: collectAfter, Logger: logger})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- peers.Run(runCtx) }()
	defer func() { stop(); require.NoError(t, <-done) }()

	require.Eventually(t, func() bool {
		_, err := leases.Get(ctx, "health-crashed", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 20*time.Second, 100*time.Millisecond, "the crashed replica's Lease was never collected")
	require.GreaterOrEqual(t, time.Since(started), collectAfter, "collected before it had been unchanged for CollectAfter")

	// Well past CollectAfter, the Lease being renewed and the other group's are still there.
	time.Sleep(2 * collectAfter)
	for _, name := range []string{"health-skewed", "rotation-crashed", "health-live"} {
		_, err := leases.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "%s was collected", name)
	}
	require.Equal(t, []shard.Peer{{ID: "live"}}, peers.Live(), "an expired Lease counted as a live peer")

	mu.Lock()
	defer mu.Unlock()
	var collected []string
	for _, line := range logs {
		if strings.Contains(line, "collected the Lease") {
			collected = append(collected, line)
		}
	}
	require.Len(t, collected, 1, "%q", logs)
	require.Contains(t, collected[0], `"lease"="health-crashed"`)
	require.Contains(t, collected[0], `"replica"="health-crashed"`)
}

// renewSkewed keeps renewing Lease health-skewed as a replica whose clock is an hour behind
// would, each renew time an hour old, until stopped.
func renewSkewed(ctx context.Context, leases coordinationv1client.LeaseInterface) (stop func()) {
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		for renewCtx.Err() == nil {
			if l, err := leases.Get(renewCtx, "health-skewed", metav1.GetOptions{}); err == nil {
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-time.Hour)}
				_, _ = leases.Update(renewCtx, l, metav1.UpdateOptions{})
			}
			select {
			case <-renewCtx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { stopRenewing(); <-renewing }
}
