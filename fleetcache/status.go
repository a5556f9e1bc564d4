package fleetcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/internal/inlineinformer"
)

// State is how current one member's cache of one kind is.
type State int

const (
	// Syncing: the cache has not yet listed the member's objects (Err says why, if a list
	// failed). It holds nothing, or what an earlier list left.
	Syncing State = iota + 1
	// Synced: the cache holds the member's objects and follows their changes.
	Synced
	// Stale: the cache was synced, but watching the member fails (Err); it holds the objects as
	// they were at Since.
	Stale
)

func (s State) String() string {
	switch s {
	case Syncing:
		return "Syncing"
	case Synced:
		return "Synced"
	case Stale:
		return "Stale"
	}
	return "Unknown"
}

// Status says how current one member's cache of one kind is, so that a tool can say so beside
// what it shows: a member that is down shows as stale since when, not as an empty list.
type Status struct {
	State State
	// Since is when the state began: when the cache started syncing, synced, or went stale.
	Since time.Time
	// Err is why the cache is stale, or why it has not synced yet; nil otherwise. It never holds
	// a credential.
	Err error
}

// Fresh reports whether the cache is synced and following the member.
func (s Status) Fresh() bool { return s.State == Synced }

// Refused reports whether the member refused to list the kind (Forbidden or Unauthorized): the
// cache holds nothing, and a count of what it holds would be a count of nothing, not zero objects.
func (s Status) Refused() bool {
	return s.State == Syncing && (apierrors.IsForbidden(s.Err) || apierrors.IsUnauthorized(s.Err))
}

// unserved: the member has never listed the kind because it does not serve it (no such CRD),
// which it answers at every retry until the CRD is made.
func (s Status) unserved() bool {
	return s.State == Syncing && apierrors.IsNotFound(s.Err)
}

func (s Status) String() string {
	if s.State == 0 {
		// The zero Status, as Kind.Status answers (with false) for a member it has no cache of.
		return "no cache of this member (not in the caches' members, or the kind not asked of it yet)"
	}
	since := s.Since.Format(time.RFC3339)
	switch {
	case s.State == Stale:
		return fmt.Sprintf("stale since %s: %v", since, s.Err)
	case s.State == Syncing && s.Err != nil:
		return fmt.Sprintf("syncing since %s: %v", since, s.Err)
	}
	return fmt.Sprintf("%s since %s", strings.ToLower(s.State.String()), since)
}

// memberInformer is one kind's informer on one member, with its status.
type memberInformer struct {
	mu       sync.Mutex
	informer *inlineinformer.Informer // nil until the member's clients are built
	status   Status
	// gen is the kind's Generation, moved on whenever status changes.
	gen *atomic.Uint64
}

func newMemberInformer(gen *atomic.Uint64) *memberInformer {
	gen.Add(1) // a member's cache, Syncing, is there
	return &memberInformer{status: Status{State: Syncing, Since: time.Now()}, gen: gen}
}

// setStatus records s, moving the kind's Generation on when it differs from the status held.
// Called with st.mu held.
func (st *memberInformer) setStatus(s Status) {
	if s.State == st.status.State && s.Since.Equal(st.status.Since) && errorText(s.Err) == errorText(st.status.Err) {
		st.status = s
		return
	}
	st.status = s
	st.gen.Add(1)
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (st *memberInformer) get() (*inlineinformer.Informer, Status) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.informer, st.status
}

// fail records a failed list or watch: a synced cache goes stale from the first failure. It
// reports whether the failure repeats a refusal already recorded: the member's answer has not
// changed, and saying it again says nothing new.
func (st *memberInformer) fail(err error) (repeated bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	next := st.status
	if next.State == Synced {
		next.State, next.Since = Stale, time.Now()
	}
	repeated = (st.status.Refused() || st.status.unserved()) && st.status.Err.Error() == err.Error()
	next.Err = err
	st.setStatus(next)
	return repeated
}

// ok records a list or watch that the member answered: a stale cache follows the member again.
func (st *memberInformer) ok() {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch st.status.State {
	case Stale:
		st.setStatus(Status{State: Synced, Since: time.Now()})
	case Syncing:
		if st.status.Err != nil {
			st.setStatus(Status{State: Syncing, Since: st.status.Since})
		}
	}
}

// synced records the informer's first complete list.
func (st *memberInformer) synced() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.status.State == Syncing {
		st.setStatus(Status{State: Synced, Since: time.Now()})
	}
}

// NotSyncedError is WaitForCacheSync's error: the members whose caches did not sync in time,
// each with its status.
type NotSyncedError struct {
	Kind    string
	Members map[types.NamespacedName]Status
}

func (e *NotSyncedError) Error() string {
	keys := make([]string, 0, len(e.Members))
	byKey := map[string]Status{}
	for k, s := range e.Members {
		keys = append(keys, k.String())
		byKey[k.String()] = s
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d members not synced:", e.Kind, len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, " %s (%s);", k, byKey[k])
	}
	return strings.TrimSuffix(b.String(), ";")
}

// watchErrorHandler records an informer's failed lists and watches in its status, then logs as
// client-go does (log: cache.DefaultWatchErrorHandler), but once for a refusal that repeats: a
// member whose credentials may not list a kind answers so at every retry, for good, and client-go
// logged each (18 lines a minute per member and kind). So for a kind the member does not serve
// (an optional CRD, such as the About API's ClusterProperty, that it lacks).
func watchErrorHandler(st *memberInformer, log cache.WatchErrorHandlerWithContext) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *cache.Reflector, err error) {
		// A watch that ends or whose resourceVersion expired is routine: the informer relists.
		if ctx.Err() == nil && !errors.Is(err, io.EOF) && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			if st.fail(err) {
				return
			}
		}
		log(ctx, r, err)
	}
}
