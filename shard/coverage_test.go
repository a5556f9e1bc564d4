package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// memberList is a MemberSource held in memory: a Fleet's events, without a registry.
type memberList struct {
	mu      sync.Mutex
	members map[types.NamespacedName]*multicluster.Member
	subs    []func(multicluster.MemberEvent)
}

func (l *memberList) Members() []*multicluster.Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sorted(l.members)
}

// sorted is ms ordered by cluster set and name.
func sorted(ms map[types.NamespacedName]*multicluster.Member) []*multicluster.Member {
	out := make([]*multicluster.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *multicluster.Member) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func (l *memberList) Subscribe(fn func(multicluster.MemberEvent)) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range sorted(l.members) {
		fn(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
	}
	l.subs = append(l.subs, fn)
	return func() {}
}

func (l *memberList) add(name string) {
	m := multicluster.NewMember(&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}, multicluster.Clients{})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.members[m.Name()] = m
	for _, fn := range l.subs {
		fn(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
	}
}

func (l *memberList) remove(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.members[key]
	delete(l.members, key)
	for _, fn := range l.subs {
		fn(multicluster.MemberEvent{Type: multicluster.MemberRemoved, Member: m})
	}
}

// Coverage and exclusivity through 100 random changes (members joining and leaving, replicas
// joining, leaving and crashing), once every replica has seen the change: the owned sets add up to
// the whole fleet and no member is owned twice. No servers: the group is set as the replicas'
// Leases would say it.
func TestCoverageThroughChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fleet := &memberList{members: map[types.NamespacedName]*multicluster.Member{}}
	for i := range 300 {
		fleet.add(fmt.Sprintf("member-%03d", i))
	}
	type replica struct {
		peers *Peers
		view  *View
	}
	replicas := map[string]*replica{}
	next := 0
	startReplica := func() {
		id := fmt.Sprintf("x-%d", next)
		next++
		p := &Peers{opts: PeerOptions{Identity: id}}
		v := NewView(fleet, p)
		subset := v.impl.(*wholeFleet).subset
		subset.Keep(ownerByName(p.Live(), id))
		subset.Follow(fleet)
		replicas[id] = &replica{peers: p, view: v}
	}
	// settle gives every replica the same group, as each would read it from the Leases, and
	// checks the division.
	settle := func(step int) {
		var live []Peer
		for id := range replicas {
			live = append(live, Peer{ID: id})
		}
		owner := map[types.NamespacedName]string{}
		for id, rep := range replicas {
			rep.peers.mu.Lock()
			rep.peers.live = live
			rep.peers.mu.Unlock()
			// What Run does when the group changes.
			rep.view.impl.(*wholeFleet).subset.Keep(ownerByName(rep.peers.Live(), id))
			for _, m := range rep.view.Members() {
				other, twice := owner[m.Name()]
				require.False(t, twice, "step %d: %s owned by %s and %s", step, m.Name(), other, id)
				owner[m.Name()] = id
			}
		}
		if len(replicas) > 0 {
			require.Len(t, owner, len(fleet.Members()), "step %d: members owned by no replica", step)
		}
	}
	for range 3 {
		startReplica()
	}
	settle(0)
	start := time.Now()
	for step := 1; step <= 100; step++ {
		switch k := r.IntN(10); {
		case k < 4:
			fleet.add(fmt.Sprintf("joined-%03d", step))
		case k < 7:
			members := fleet.Members()
			fleet.remove(members[r.IntN(len(members))].Name())
		case k < 9 || len(replicas) < 2:
			startReplica()
		default:
			for id := range replicas { // a replica stops or crashes: the others stop counting it
				delete(replicas, id)
				break
			}
		}
		settle(step)
	}
	t.Logf("100 changes over %d members and up to %d replicas, checked in %s", len(fleet.Members()), next, time.Since(start).Round(time.Millisecond))
}
