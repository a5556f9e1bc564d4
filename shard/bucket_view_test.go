package shard_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/shard"
)

// selectors records the label selectors of a replica's requests for Clusters.
type selectors struct {
	mu  sync.Mutex
	all []string
}

func (s *selectors) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if strings.Contains(req.URL.Path, "/clusters") {
			s.mu.Lock()
			s.all = append(s.all, req.URL.Query().Get("labelSelector"))
			s.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// watched is the buckets of the last "in" selector the replica asked for.
func (s *selectors) watched(t *testing.T) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sel := range slices.Backward(s.all) {
		parsed, err := labels.Parse(sel)
		require.NoError(t, err)
		reqs, _ := parsed.Requirements()
		for _, r := range reqs {
			if r.Key() == shard.BucketLabel && r.Operator() == selection.In {
				return r.Values().List()
			}
		}
	}
	return nil
}

// unfiltered is the selectors of the replica's requests for Clusters that did not select on
// their bucket, read under the lock: the replica's watches go on asking meanwhile.
func (s *selectors) unfiltered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []string
	for _, sel := range s.all {
		if !strings.Contains(sel, shard.BucketLabel) {
			found = append(found, sel)
		}
	}
	return found
}

// bucketReplica is a replica of a bucket view, with the selectors it asked the registry for.
type bucketReplica struct {
	*replica
	asked *selectors
}

func startBucketReplica(t *testing.T, ns, id string) *bucketReplica {
	t.Helper()
	asked := &selectors{}
	cfg := rest.CopyConfig(lf.Registry.Config)
	cfg.Wrap(asked.wrap)
	kube := kubernetes.NewForConfigOrDie(cfg)
	peers, err := shard.NewPeers(kube.CoordinationV1(), shard.PeerOptions{
		Namespace: ns, Group: "health", Identity: id, LeaseDuration: leaseDuration, RenewPeriod: renewPeriod})
	require.NoError(t, err)
	view, err := shard.NewBucketView(versioned.NewForConfigOrDie(cfg), newResolver(t, kube), multicluster.FleetOptions{Namespaces: []string{ns}}, peers)
	require.NoError(t, err)
	return &bucketReplica{replica: runView(peers, view), asked: asked}
}

// Three replicas of bucket views divide a fleet whose Clusters are labelled with their buckets,
// and some that are not, or are labelled with values that name no bucket (an attacker's "07",
// which the registry would not match to bucket 7), or with a bucket that is not their name's:
// each is owned by exactly one replica. Each replica asks the registry only for its buckets'
// Clusters and those in no bucket, and the buckets they ask for are disjoint and cover all.
// Relabelling moves a member; a replica that stops gives up its buckets to the others.
func TestBucketViewsDivideTheFleet(t *testing.T) {
	ctx := t.Context()
	ns, clusters := newSet(t)
	labelled := map[string]string{}
	for i := range 40 {
		name := fmt.Sprintf("member-%02d", i)
		labelled[name] = shard.BucketOf(ns, name)
	}
	others := map[string]string{"unlabelled-a": "", "unlabelled-b": "", "leading-zero": "07", "out-of-range": "64", "not-a-number": "x", "elsewhere": "3"}
	for name, bucket := range others {
		labelled[name] = bucket
	}
	for name, bucket := range labelled {
		var labels map[string]string
		if bucket != "" {
			labels = map[string]string{shard.BucketLabel: bucket}
		}
		createCluster(t, clusters, name, labels)
	}
	members := len(labelled)

	r0, r1, r2 := startBucketReplica(t, ns, "x-0"), startBucketReplica(t, ns, "x-1"), startBucketReplica(t, ns, "x-2")
	requireDivided(t, members, 30*time.Second, r0.replica, r1.replica, r2.replica)
	requireBucketsDivided(t, 30*time.Second, r0, r1, r2)

	// Relabelled into no bucket, into a bucket, and from one bucket to another: still owned once.
	relabel := func(name, bucket string) {
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		c.Labels = map[string]string{shard.BucketLabel: bucket}
		if bucket == "" {
			c.Labels = nil
		}
		_, err = clusters.Update(ctx, c, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	relabel("member-00", "")
	relabel("unlabelled-a", shard.BucketOf(ns, "unlabelled-a"))
	relabel("member-01", "0")
	relabel("member-02", "63")
	requireDivided(t, members, 30*time.Second, r0.replica, r1.replica, r2.replica)

	// x-1 stops: its buckets go to the others, who ask for them.
	r1.halt()
	took := requireDivided(t, members, 30*time.Second, r0.replica, r2.replica)
	t.Logf("after a graceful stop, every member owned again within %s", took.Round(100*time.Millisecond))
	requireBucketsDivided(t, 30*time.Second, r0, r2)
	r0.halt()
	r2.halt()
	require.Empty(t, r0.view.Members(), "a stopped view still owns members")
}

// requireBucketsDivided waits until the buckets the replicas ask the registry for are disjoint and
// cover every bucket, and checks that none asked for Clusters without selecting on their bucket.
func requireBucketsDivided(t *testing.T, within time.Duration, replicas ...*bucketReplica) {
	t.Helper()
	require.Eventually(t, func() bool {
		seen := map[string]int{}
		for _, r := range replicas {
			for _, b := range r.asked.watched(t) {
				seen[b]++
			}
		}
		for b := range shard.Buckets {
			if seen[fmt.Sprint(b)] != 1 {
				return false
			}
		}
		return len(seen) == shard.Buckets
	}, within, 50*time.Millisecond, "the replicas' watches do not divide the buckets")
	for _, r := range replicas {
		require.Empty(t, r.asked.unfiltered(), "a replica asked for every Cluster")
	}
}

// runView runs peers and view until halted, telling events of what the view owns.
func runView(peers *shard.Peers, view *shard.View) *replica {
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{peers: peers, view: view, stop: cancel, done: make(chan struct{}), events: newTracker()}
	unsubscribe := r.view.Subscribe(r.events.on)
	peersDone := make(chan struct{})
	go func() {
		defer close(peersDone)
		_ = peers.Run(ctx)
	}()
	go func() {
		defer close(r.done)
		defer unsubscribe()
		_ = r.view.Run(ctx)
		<-peersDone // its Lease deleted
	}()
	return r
}

// A member kept through a change of the buckets a replica owns, relabelled from a bucket it lost
// to one it kept between the old watch's end and the new list, is kept once the new buckets are
// watched: it never left the owned Fleet, so no MemberAdded would bring it back.
func TestBucketViewKeepsAMemberRelabelledWhileItsWatchChanges(t *testing.T) {
	ctx := t.Context()
	ns, clusters := newSet(t)
	c := createCluster(t, clusters, "moved", map[string]string{shard.BucketLabel: "1"})
	key := types.NamespacedName{Namespace: ns, Name: "moved"}
	resolver := newResolver(t, kubernetes.NewForConfigOrDie(lf.Registry.Config))
	parts, err := shard.NewBucketParts(versioned.NewForConfigOrDie(lf.Registry.Config), resolver, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, err)
	defer parts.Follow()()
	defer parts.StopWatching()

	parts.Keep([]int{1})
	require.NoError(t, parts.Watch(ctx, []int{1}))
	require.Eventually(t, func() bool { return parts.Kept(key) }, 10*time.Second, 20*time.Millisecond)

	// The group changes: bucket 1 lost, 2 gained. The rule drops the member at once; the old
	// watch ends; the member is relabelled into bucket 2; then the new buckets are listed.
	parts.Keep([]int{2})
	require.False(t, parts.Kept(key))
	parts.StopWatching()
	c.Labels[shard.BucketLabel] = "2"
	_, err = clusters.Update(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, parts.Watch(ctx, []int{2}))
	require.True(t, parts.Kept(key), "a member of a bucket this replica owns is not kept")
}
