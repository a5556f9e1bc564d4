package shard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/shard"
)

// replica is one replica of a controller: its membership of the group, and its view of the Fleet.
type replica struct {
	peers  *shard.Peers
	view   *shard.View
	stop   context.CancelFunc
	done   chan struct{}
	events *tracker
}

// tracker keeps what a subscriber of a View has been told it owns.
type tracker struct {
	mu    chan struct{}
	owned map[types.NamespacedName]bool
}

func newTracker() *tracker {
	return &tracker{mu: make(chan struct{}, 1), owned: map[types.NamespacedName]bool{}}
}

func (t *tracker) on(ev multicluster.MemberEvent) {
	t.mu <- struct{}{}
	defer func() { <-t.mu }()
	switch ev.Type {
	case multicluster.MemberAdded:
		t.owned[ev.Member.Name()] = true
	case multicluster.MemberRemoved:
		delete(t.owned, ev.Member.Name())
	}
}

func (t *tracker) count() int {
	t.mu <- struct{}{}
	defer func() { <-t.mu }()
	return len(t.owned)
}

const (
	leaseDuration = 3 * time.Second
	renewPeriod   = 500 * time.Millisecond
)

func startReplica(t *testing.T, ns, id string, fleet multicluster.MemberSource) *replica {
	t.Helper()
	peers, err := shard.NewPeers(kubernetes.NewForConfigOrDie(lf.Registry.Config).CoordinationV1(), shard.PeerOptions{
		Namespace: ns, Group: "health", Identity: id, LeaseDuration: leaseDuration, RenewPeriod: renewPeriod})
	require.NoError(t, err)
	return runView(peers, shard.NewView(fleet, peers))
}

func (r *replica) halt() {
	r.stop()
	<-r.done
}

// requireDivided waits until the replicas' views own every member exactly once, and their
// subscribers were told the same; it returns how long that took.
func requireDivided(t *testing.T, members int, within time.Duration, replicas ...*replica) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for {
		owner := map[types.NamespacedName]int{}
		told := 0
		for _, r := range replicas {
			for _, m := range r.view.Members() {
				owner[m.Name()]++
			}
			told += r.events.count()
		}
		twice := 0
		for _, n := range owner {
			if n > 1 {
				twice++
			}
		}
		// The division is the one asserted only once every replica sees every other (and no
		// stopped one): before, one may own all a replica not yet seen will take (under load, a
		// replica was found owning nothing right after the members were divided).
		seeAll := true
		for _, r := range replicas {
			seeAll = seeAll && len(r.peers.Live()) == len(replicas)
		}
		if len(owner) == members && twice == 0 && told == members && seeAll {
			return time.Since(start)
		}
		last = fmt.Sprintf("%d of %d members owned, %d by two replicas, subscribers told of %d, every replica sees the others: %t", len(owner), members, twice, told, seeAll)
		require.Less(t, time.Since(start), within, last)
		time.Sleep(50 * time.Millisecond)
	}
}

// Three replicas divide 60 members: each member owned by exactly one; a replica that crashes
// (its Lease left to expire) has its members taken within the Lease's duration and a renewal; one
// that stops gracefully (its Lease deleted) within a renewal; a replica that joins takes its share.
func TestReplicasDivideTheFleet(t *testing.T) {
	ctx := t.Context()
	ns, clusters := newSet(t)
	const members = 60
	for i := range members {
		createCluster(t, clusters, fmt.Sprintf("member-%02d", i), nil)
	}
	resolver := newResolver(t, kubernetes.NewForConfigOrDie(lf.Registry.Config))
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), resolver, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	defer fleet.Stop()

	r0, r1, r2 := startReplica(t, ns, "x-0", fleet), startReplica(t, ns, "x-1", fleet), startReplica(t, ns, "x-2", fleet)
	requireDivided(t, members, 30*time.Second, r0, r1, r2)
	for _, r := range []*replica{r0, r1, r2} {
		require.NotEmpty(t, r.view.Members(), "a replica owns nothing")
	}

	// A member that joins is owned by one replica; one that leaves by none.
	createCluster(t, clusters, "late", nil)
	requireDivided(t, members+1, 30*time.Second, r0, r1, r2)
	require.NoError(t, clusters.Delete(ctx, "late", metav1.DeleteOptions{}))
	requireDivided(t, members, 30*time.Second, r0, r1, r2)

	// x-1 crashes: its Lease stays until it expires. The others take its members within the
	// Lease's duration and a renewal or two.
	leases := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoordinationV1().Leases(ns)
	r1.halt()
	now := metav1.NewMicroTime(time.Now())
	_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "health-x-1", Labels: map[string]string{shard.GroupLabel: "health"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x-1"), RenewTime: &now, LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second))}}, metav1.CreateOptions{})
	require.NoError(t, err, "the crashed replica's Lease, as it would have been left")
	took := requireDivided(t, members, 30*time.Second, r0, r2)
	t.Logf("after a crash, every member owned again within %s (Lease duration %s)", took.Round(100*time.Millisecond), leaseDuration)
	require.GreaterOrEqual(t, took, leaseDuration-2*renewPeriod, "members moved before the crashed replica's Lease expired")

	// x-2 stops gracefully: its Lease is deleted, and x-0 takes everything at its next look.
	r2.halt()
	took = requireDivided(t, members, 10*time.Second, r0)
	t.Logf("after a graceful stop, every member owned again within %s", took.Round(100*time.Millisecond))
	require.Len(t, r0.view.Members(), members)

	// A replica joins and takes its share.
	r3 := startReplica(t, ns, "x-3", fleet)
	require.Eventually(t, func() bool { return len(r3.view.Members()) > 0 }, 30*time.Second, 50*time.Millisecond, "the new replica took nothing")
	requireDivided(t, members, 30*time.Second, r0, r3)
	r0.halt()
	r3.halt()
	require.Empty(t, r0.view.Members(), "a stopped view still owns members")
}
