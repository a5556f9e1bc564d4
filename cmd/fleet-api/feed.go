package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
)

// Watch event types, as a Kubernetes watch names them; a BOOKMARK carries only the resource
// version a client may resume from.
const (
	eventAdded    = "ADDED"
	eventModified = "MODIFIED"
	eventDeleted  = "DELETED"
	eventBookmark = "BOOKMARK"
	eventError    = "ERROR"
)

// summary is what a feed numbers the changes of: a member's (clusterSummary, GET /clusters) or a
// chart release's (chartRelease, GET /charts). same says whether two say the same thing, so that
// a poll that finds nothing new sends nothing; key names it.
type summary[T any] interface {
	same(T) bool
	key() (namespace, name string)
}

// change is one change to what a list route answers, numbered by the feed.
type change[T summary[T]] struct {
	rev     uint64
	kind    string // eventAdded, eventModified or eventDeleted
	summary T
	// prev is the summary before a MODIFIED: a watcher with a selector tells from it whether
	// the member entered or left its selection.
	prev T
}

// seenBy is how a watcher whose selection matches sees c: the event type it is sent, or "" for
// none. A member that enters the selection is ADDED, one that leaves it DELETED, as a
// Kubernetes watch with a selector sends them.
func (c change[T]) seenBy(matches func(T) bool) string {
	was := c.kind == eventModified && matches(c.prev) || c.kind == eventDeleted && matches(c.summary)
	is := c.kind != eventDeleted && matches(c.summary)
	switch {
	case is && was:
		return eventModified
	case is:
		return eventAdded
	case was:
		return eventDeleted
	}
	return ""
}

// feed turns the members' summaries, as the caches see them, into numbered changes that
// watchers replay from any revision still kept. It is fed by polling (poll): a member's summary
// changes with its Cluster, its caches' objects and its caches' state (a member turns stale
// without any event), so comparing summaries catches every kind of change alike. Summaries are
// compared by what they say (clusterSummary.same), so a poll that finds nothing new sends nothing.
type feed[T summary[T]] struct {
	mu      sync.Mutex
	rev     uint64
	current map[types.NamespacedName]T
	log     []change[T] // the last keep changes, oldest first
	keep    int
	// changed is closed, and replaced, whenever changes are added: watchers wait on it.
	changed chan struct{}
}

// newFeed is the feed of the members' summaries (GET /watch/clusters).
func newFeed(keep int) *feed[clusterSummary] { return newFeedOf[clusterSummary](keep) }

func newFeedOf[T summary[T]](keep int) *feed[T] {
	return &feed[T]{current: map[types.NamespacedName]T{}, keep: keep, changed: make(chan struct{})}
}

// update records how summaries (every member's, now) differ from the last ones.
func (f *feed[T]) update(summaries map[types.NamespacedName]T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var added []change[T]
	for key, s := range summaries {
		old, ok := f.current[key]
		switch {
		case !ok:
			added = append(added, change[T]{kind: eventAdded, summary: s})
		case !old.same(s):
			added = append(added, change[T]{kind: eventModified, summary: s, prev: old})
		}
	}
	for key, s := range f.current {
		if _, ok := summaries[key]; !ok {
			added = append(added, change[T]{kind: eventDeleted, summary: s})
		}
	}
	if len(added) == 0 {
		return
	}
	for i := range added {
		f.rev++
		added[i].rev = f.rev
	}
	f.current = summaries
	f.log = append(f.log, added...)
	if extra := len(f.log) - f.keep; extra > 0 {
		f.log = append(f.log[:0:0], f.log[extra:]...)
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// snapshot is every member's summary now, the revision they are at, and a channel closed at the
// next change.
func (f *feed[T]) snapshot() ([]T, uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]T, 0, len(f.current))
	for _, s := range f.current {
		out = append(out, s)
	}
	return out, f.rev, f.changed
}

// since is the changes after rev, the revision they reach, and a channel closed at the next
// change; ok is false when changes after rev are no longer kept (the watcher must list again).
func (f *feed[T]) since(rev uint64) (changes []change[T], at uint64, next <-chan struct{}, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rev > f.rev {
		return nil, f.rev, f.changed, false
	}
	if rev < f.rev && (len(f.log) == 0 || f.log[0].rev > rev+1) {
		return nil, f.rev, f.changed, false
	}
	for i := len(f.log) - 1; i >= 0 && f.log[i].rev > rev; i-- {
		changes = append(changes, f.log[i])
	}
	for i, j := 0, len(changes)-1; i < j; i, j = i+1, j-1 {
		changes[i], changes[j] = changes[j], changes[i]
	}
	return changes, f.rev, f.changed, true
}

// poll updates the feed from summarize every interval until ctx ends. summarize returns nil when
// it knows that nothing changed (an empty map is a fleet of no members).
func (f *feed[T]) poll(ctx context.Context, interval time.Duration, summarize func() map[types.NamespacedName]T) {
	update := func() {
		if summaries := summarize(); summaries != nil {
			f.update(summaries)
		}
	}
	update()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			update()
		}
	}
}

// pollChanges is poll, summarizing only when version, what the summaries are computed from,
// moved since the last time: an unchanged fleet costs a poll nothing.
func (f *feed[T]) pollChanges(ctx context.Context, interval time.Duration, version func() inputs, summarize func() map[types.NamespacedName]T) {
	var last inputs
	summarized := false
	f.poll(ctx, interval, func() map[types.NamespacedName]T {
		if v := version(); !summarized || v != last {
			last, summarized = v, true
			return summarize()
		}
		return nil
	})
}

// revision is the revision the feed is at.
func (f *feed[T]) revision() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

func formatRev(rev uint64) string { return strconv.FormatUint(rev, 10) }

// watchEvent is one line of GET /watch/clusters (Cluster) or GET /watch/charts (Chart).
type watchEvent struct {
	Type            string          `json:"type"`
	ResourceVersion string          `json:"resourceVersion"`
	Cluster         *clusterSummary `json:"cluster,omitempty"`
	Chart           *chartRelease   `json:"chart,omitempty"`
	Release         *chartRelease   `json:"release,omitempty"`
	Status          *metav1.Status  `json:"status,omitempty"`
}

// Timings of a watch: a bookmark at least this often, so that an idle client knows the stream
// lives and where to resume; and the longest a stream lasts before the client resumes it, as an
// API server ends watches (so that every caller is authenticated again now and then).
const (
	bookmarkEvery  = 10 * time.Second
	maxWatchLength = 30 * time.Minute
)

// watchClusters streams changes to what GET /clusters answers, one JSON event a line: first an
// ADDED for every member the caller may see (unless ?resourceVersion= resumes after a revision
// GET /clusters or an event gave), then each change. ?labelSelector= and ?fieldSelector= choose
// members as for GET /clusters: one that enters the selection is ADDED, one that leaves it
// DELETED. Members of sets where the caller may no longer list Clusters drop out as the
// registry's answer changes (kept 10 s). A revision no longer kept ends the stream with an ERROR
// event whose status is 410 Expired: list again.
func (s *server) watchClusters(r *http.Request) (response, error) {
	selected, err := parseSelection(r.URL.Query())
	if err != nil {
		return response{}, apierrors.NewBadRequest(err.Error())
	}
	return stream(r, s.feed, selected.matches, func(ctx context.Context, ns, _ string) bool {
		ok, _, err := s.guard.allowed(ctx, "list", ns, "")
		return err == nil && ok
	}, func(e *watchEvent, c clusterSummary) { e.Cluster = &c }, "GET /clusters")
}

// watchCluster streams one member's changes as watchClusters does, for a caller the registry lets
// watch that Cluster (as kubectl get cluster NAME --watch asks): an ADDED when it is there (at
// once, or when it is registered), then each change, a DELETED when it goes.
func (s *server) watchCluster(r *http.Request) (response, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	selected, err := parseSelection(r.URL.Query())
	if err != nil {
		return response{}, apierrors.NewBadRequest(err.Error())
	}
	selected.fields = fields.AndSelectors(selected.fields, fields.OneTermEqualSelector("metadata.namespace", ns), fields.OneTermEqualSelector("metadata.name", name))
	if err := s.authorize(r, "watch", ns, name); err != nil {
		return response{}, err
	}
	return stream(r, s.feed, selected.matches, func(ctx context.Context, ns, name string) bool {
		ok, _, err := s.guard.allowed(ctx, "watch", ns, name)
		return err == nil && ok
	}, func(e *watchEvent, c clusterSummary) { e.Cluster = &c }, "GET /clusters")
}

// stream is the answer of a watch route: the feed's changes that selected chooses and may
// allows (asked again as the stream goes, from the guard's short-lived answers), as GET
// /watch/clusters describes. set puts a summary in its event; list is the list route a watcher
// starts again from. A resourceVersion it cannot resume from is an error, written by the API's
// encoder; what follows is the stream's (send).
func stream[T summary[T]](r *http.Request, f *feed[T], matches func(T) bool, may func(ctx context.Context, namespace, name string) bool,
	set func(*watchEvent, T), list string) (response, error) {
	var (
		pending []change[T]
		rev     uint64
		next    <-chan struct{}
	)
	if from := r.URL.Query().Get("resourceVersion"); from != "" {
		n, err := strconv.ParseUint(from, 10, 64)
		if err != nil {
			return response{}, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q: want the number GET /clusters or an event gave", from))
		}
		var kept bool
		if pending, rev, next, kept = f.since(n); !kept {
			return response{}, apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %s is too old or unknown: list again (%s) and watch from its resourceVersion", from, list))
		}
	} else {
		var current []T
		current, rev, next = f.snapshot()
		slices.SortFunc(current, func(a, b T) int {
			ans, an := a.key()
			bns, bn := b.key()
			return strings.Compare(ans+"/"+an, bns+"/"+bn)
		})
		for _, c := range current {
			pending = append(pending, change[T]{rev: rev, kind: eventAdded, summary: c})
		}
	}
	return response{Kept: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		send(w, r, f, pending, rev, next, matches, may, set)
	})}, nil
}

// send writes a stream: its pending changes, then each change after rev, with a bookmark every
// bookmarkEvery, for at most maxWatchLength.
func send[T summary[T]](w http.ResponseWriter, r *http.Request, f *feed[T], pending []change[T], rev uint64, next <-chan struct{},
	matches func(T) bool, may func(ctx context.Context, namespace, name string) bool, set func(*watchEvent, T)) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpapi.WriteStatus(w, apierrors.NewInternalError(errors.New("the connection cannot stream")))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), maxWatchLength)
	defer cancel()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	write := func(e watchEvent) bool { return enc.Encode(e) == nil }
	bookmark := time.NewTicker(bookmarkEvery)
	defer bookmark.Stop()
	for {
		for _, c := range pending {
			kind := c.seenBy(matches)
			ns, name := c.summary.key()
			if kind == "" || !may(ctx, ns, name) {
				continue
			}
			e := watchEvent{Type: kind, ResourceVersion: formatRev(c.rev)}
			set(&e, c.summary)
			if !write(e) {
				return
			}
		}
		flusher.Flush()
		select {
		case <-ctx.Done():
			return
		case <-bookmark.C:
			if !write(watchEvent{Type: eventBookmark, ResourceVersion: formatRev(rev)}) {
				return
			}
			pending = nil
		case <-next:
			var kept bool
			if pending, rev, next, kept = f.since(rev); !kept {
				st := apierrors.NewResourceExpired("the stream fell too far behind: list again").Status()
				_ = write(watchEvent{Type: eventError, Status: &st})
				return
			}
		}
	}
}
