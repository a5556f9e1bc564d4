package shard

import (
	"slices"
	"strings"
	"sync"

	"github.com/cluster-registry/sdk/multicluster"
)

// subscriber delivers a View's events to one fn, in order, one at a time, from a goroutine that
// runs only while events wait (as a Fleet's subscriptions do), so that a slow subscriber delays
// only itself.
type subscriber struct {
	fn func(multicluster.MemberEvent)

	mu      sync.Mutex
	queue   []multicluster.MemberEvent
	running bool
	stopped bool
}

func newSubscriber(fn func(multicluster.MemberEvent)) *subscriber { return &subscriber{fn: fn} }

func (s *subscriber) send(ev multicluster.MemberEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.queue = append(s.queue, ev)
	if !s.running {
		s.running = true
		go s.drain()
	}
}

func (s *subscriber) drain() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.stopped {
			s.running = false
			s.mu.Unlock()
			return
		}
		ev := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.fn(ev)
	}
}

func (s *subscriber) stop() {
	s.mu.Lock()
	s.stopped, s.queue = true, nil
	s.mu.Unlock()
}

func slicesSortMembers(ms []*multicluster.Member) {
	slices.SortFunc(ms, func(a, b *multicluster.Member) int { return strings.Compare(a.String(), b.String()) })
}
