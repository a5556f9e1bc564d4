package controllers

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/multicluster"
)

// handoffLogEvery is the shortest time between two log lines about members changing hands: a
// replica that joins or leaves a group of three moves a third of the fleet at once.
const handoffLogEvery = 5 * time.Second

// handoffNamesShown is how many members a handoff line names; it counts the rest.
const handoffNamesShown = 10

// handoffLog says in the log which members this replica took and gave up, gathered over
// handoffLogEvery so that a large move is a line, not thousands; the metrics count them too.
type handoffLog struct {
	log logr.Logger

	mu           sync.Mutex
	gained, lost []types.NamespacedName
}

// observe records a member event of the replica's view.
func (h *handoffLog) observe(ev multicluster.MemberEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev.Type {
	case multicluster.MemberAdded:
		h.gained = append(h.gained, ev.Member.Name())
	case multicluster.MemberRemoved:
		h.lost = append(h.lost, ev.Member.Name())
	}
}

// run writes what was gathered every handoffLogEvery until ctx ends, and once more then.
func (h *handoffLog) run(ctx context.Context) error {
	t := time.NewTicker(handoffLogEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.flush()
			return nil
		case <-t.C:
			h.flush()
		}
	}
}

func (h *handoffLog) flush() {
	h.mu.Lock()
	gained, lost := h.gained, h.lost
	h.gained, h.lost = nil, nil
	h.mu.Unlock()
	if len(gained) > 0 {
		h.log.Info("took members from the group", "count", len(gained), "members", names(gained))
	}
	if len(lost) > 0 {
		h.log.Info("gave members up to the group", "count", len(lost), "members", names(lost))
	}
}

// names is the first handoffNamesShown members, and how many more.
func names(members []types.NamespacedName) string {
	var b strings.Builder
	for i, m := range members {
		if i == handoffNamesShown {
			b.WriteString(" and " + strconv.Itoa(len(members)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.String())
	}
	return b.String()
}
