package multicluster_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// source is a ChangeSource the test drives by hand.
type source struct {
	mu      sync.Mutex
	members map[types.NamespacedName]*multicluster.Member
	subs    []func(multicluster.MemberEvent)
	changes []func(*multicluster.Member)
}

func (s *source) Members() []*multicluster.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*multicluster.Member
	for _, m := range s.members {
		out = append(out, m)
	}
	return out
}

func (s *source) Subscribe(fn func(multicluster.MemberEvent)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.members {
		fn(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
	}
	s.subs = append(s.subs, fn)
	return func() {}
}

func (s *source) SubscribeChanges(fn func(*multicluster.Member)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, fn)
	return func() {}
}

func (s *source) send(ev multicluster.MemberEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case multicluster.MemberAdded:
		s.members[ev.Member.Name()] = ev.Member
	case multicluster.MemberRemoved:
		delete(s.members, ev.Member.Name())
	}
	for _, fn := range s.subs {
		fn(ev)
	}
}

func members(names ...string) []*multicluster.Member {
	var clusters []v1alpha1.Cluster
	for _, n := range names {
		clusters = append(clusters, v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: n}})
	}
	return multicluster.MembersOf(nil, clusters, multicluster.FleetOptions{})
}

// recorder keeps what a subscriber was told, as lines.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) on(ev multicluster.MemberEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kind := map[multicluster.MemberEventType]string{multicluster.MemberAdded: "+", multicluster.MemberRemoved: "-", multicluster.MemberReachChanged: "~"}[ev.Type]
	r.lines = append(r.lines, kind+ev.Member.Name().Name)
}

func (r *recorder) take(t *testing.T, n int) []string {
	t.Helper()
	require.Eventually(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.lines) >= n }, 5*time.Second, time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}

// A Subset keeps what its rule keeps of what its source has, and tells each difference once: a
// member joining or leaving the source, a rule that changes, a member the source replaced, a
// reach change of a kept member only; and when it stops following, it keeps nothing and says so.
func TestSubsetFollowsItsSourceAndRule(t *testing.T) {
	ms := members("a", "b", "c", "d")
	src := &source{members: map[types.NamespacedName]*multicluster.Member{}}
	for _, m := range ms[:3] {
		src.members[m.Name()] = m
	}
	s := multicluster.NewSubset()
	var got recorder
	defer s.Subscribe(got.on)()
	stop := s.Follow(src)
	require.Empty(t, s.Members(), "kept something with no rule")

	even := func(key types.NamespacedName) bool { return key.Name == "a" || key.Name == "c" || key.Name == "d" }
	s.Keep(even)
	require.Equal(t, []string{"+a", "+c"}, got.take(t, 2))
	src.send(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: ms[3]})
	src.send(multicluster.MemberEvent{Type: multicluster.MemberReachChanged, Member: ms[1]}) // not kept: not told
	src.send(multicluster.MemberEvent{Type: multicluster.MemberReachChanged, Member: ms[0]})
	require.Equal(t, []string{"+d", "~a"}, got.take(t, 2))

	replaced := members("c")[0]
	src.send(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: replaced})
	require.Equal(t, []string{"-c", "+c"}, got.take(t, 2))
	require.True(t, s.Has(types.NamespacedName{Namespace: "fleet", Name: "c"}))

	s.Keep(func(key types.NamespacedName) bool { return key.Name == "b" })
	require.ElementsMatch(t, []string{"-a", "-c", "-d", "+b"}, got.take(t, 4))
	s.Keep(func(key types.NamespacedName) bool { return key.Name == "b" }) // the same rule again: nothing
	src.send(multicluster.MemberEvent{Type: multicluster.MemberRemoved, Member: ms[1]})
	require.Equal(t, []string{"-b"}, got.take(t, 1))
	require.Empty(t, s.Members())

	s.Keep(func(types.NamespacedName) bool { return true })
	require.Len(t, got.take(t, 3), 3)
	stop()
	require.ElementsMatch(t, []string{"-a", "-c", "-d"}, got.take(t, 3))
	require.Empty(t, s.Members())
}

// Following a source of 10,000 members costs no pass over them all per member: each joins in
// about the same time whatever the size (it was a sort of them all per event in decision.View).
func BenchmarkSubsetFollow(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("m%05d", i)
			}
			ms := members(names...)
			for range b.N {
				src := &source{members: map[types.NamespacedName]*multicluster.Member{}}
				s := multicluster.NewSubset()
				s.Keep(func(types.NamespacedName) bool { return true })
				stop := s.Follow(src)
				for _, m := range ms {
					src.send(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
				}
				stop()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/member")
		})
	}
}
