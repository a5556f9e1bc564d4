package delivery

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/shard"
)

// BenchmarkShare: a sharded replica's bookkeeping in one pass of a Release over members=N, split
// by shard.Owner between 3 replicas: reading the other two's status slices (100 members each, 5
// objects a member, every member Ready) and sharing with them (share: what this replica takes,
// lets go of, and knows of the rest for the waves). Reported: ns/member (the pass's cost over
// every member), which stays flat from 1,000 to 10,000 members when the work is linear, for a
// pass where no slice changed (steady) and one where one slice of each other replica did.
func BenchmarkShare(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, changed := range []bool{false, true} {
			b.Run(fmt.Sprintf("members=%d/changed=%v", n, changed), func(b *testing.B) {
				c, st, others := shareFixture(n)
				live := c.live()
				c.share(st, c.reports(others, live), "r1", true)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if changed {
						for _, s := range others[:2] {
							s.ResourceVersion = fmt.Sprint(i)
						}
					}
					c.share(st, c.reports(others, live), "r1", true)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/member")
			})
		}
	}
}

// shareFixture is replica a's Controller among a, b and c, a Release's state on it (the members
// it owns, applied and Ready), and b's and c's slices of the rest.
func shareFixture(n int) (*Controller, *releaseState, []*v1alpha1.ReleaseStatusSlice) {
	peers := []shard.Peer{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	c := &Controller{replica: replicaHash("a"), opts: ControllerOptions{Sharding: &Sharding{Replica: "a",
		Owner: func(key string) string { return shard.Owner(key, peers) },
		Live:  func() []string { return []string{"a", "b", "c"} },
	}}}
	st := &releaseState{members: map[types.NamespacedName]*memberState{}}
	slicesBy := map[string][]*v1alpha1.ReleaseStatusSlice{}
	now := metav1.NewTime(time.Now())
	for i := range n {
		name := fmt.Sprintf("member-%05d", i)
		key := types.NamespacedName{Namespace: "fleet", Name: name}
		m := v1alpha1.ReleaseMemberStatus{Cluster: name, Phase: v1alpha1.PhaseReady, Revision: "r1", LastApplied: &now}
		for o := range 5 {
			m.Objects = append(m.Objects, v1alpha1.ReleaseObjectStatus{Version: "v1", Resource: "configmaps", Kind: "ConfigMap",
				Namespace: "default", Name: fmt.Sprintf("app-%d", o), Status: "Current"})
		}
		owner := shard.Owner(key.String(), peers)
		if owner == "a" {
			ms := inventory(m)
			ms.revision, ms.readyAt = "r1", now.Time
			st.members[key] = ms
			continue
		}
		list := slicesBy[owner]
		if len(list) == 0 || len(list[len(list)-1].Members) == 100 {
			list = append(list, &v1alpha1.ReleaseStatusSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet",
				Name: fmt.Sprintf("web-%s-%d", replicaHash(owner), len(list)), ResourceVersion: "1",
				Labels: map[string]string{v1alpha1.ReplicaLabel: replicaHash(owner)}}})
			slicesBy[owner] = list
		}
		s := list[len(list)-1]
		s.Members = append(s.Members, m)
	}
	var others []*v1alpha1.ReleaseStatusSlice
	for _, id := range []string{"b", "c"} {
		others = append(others, slicesBy[id]...)
	}
	return c, st, others
}
