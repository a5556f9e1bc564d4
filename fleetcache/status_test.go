package fleetcache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// A list the member refused (as the reflector wraps it) is Refused; other failures, and a synced
// or stale cache, are not.
func TestStatusRefused(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	forbidden := fmt.Errorf("failed to list *v1.Node: %w", apierrors.NewForbidden(nodes, "", errors.New(`cannot list resource "nodes"`)))
	unauthorized := fmt.Errorf("failed to list *v1.Node: %w", apierrors.NewUnauthorized("token expired"))
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, tc := range []struct {
		st   Status
		want bool
	}{
		{Status{State: Syncing, Err: forbidden}, true},
		{Status{State: Syncing, Err: unauthorized}, true},
		{Status{State: Syncing, Err: refused}, false},
		{Status{State: Syncing}, false},
		{Status{State: Stale, Err: forbidden}, false},
		{Status{State: Synced}, false},
	} {
		require.Equal(t, tc.want, tc.st.Refused(), "%v", tc.st)
	}
}

// A member that refuses a kind answers so at every retry, for good: the refusal is logged once,
// not at each retry (client-go logged 18 lines a minute), and logged again when the answer
// changes; so is a kind the member does not serve; other failures are logged each time, as
// client-go does.
func TestRepeatedRefusalLoggedOnce(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	forbidden := fmt.Errorf("failed to list *v1.Node: %w", apierrors.NewForbidden(nodes, "", errors.New(`cannot list resource "nodes"`)))
	down := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	var logged []error
	st := newMemberInformer(new(atomic.Uint64))
	handle := watchErrorHandler(st, func(_ context.Context, _ *cache.Reflector, err error) { logged = append(logged, err) })
	for range 10 {
		handle(t.Context(), nil, forbidden)
	}
	require.Equal(t, []error{forbidden}, logged, "a refusal repeated")
	_, status := st.get()
	require.True(t, status.Refused())
	handle(t.Context(), nil, down)
	handle(t.Context(), nil, down)
	handle(t.Context(), nil, forbidden)
	handle(t.Context(), nil, forbidden)
	require.Equal(t, []error{forbidden, down, down, forbidden}, logged)

	// A kind the member does not serve (its CRD absent) is answered so at every retry too.
	unserved := fmt.Errorf("failed to list clusterproperties.about.k8s.io: %w", apierrors.NewNotFound(schema.GroupResource{}, ""))
	logged = nil
	st = newMemberInformer(new(atomic.Uint64))
	handle = watchErrorHandler(st, func(_ context.Context, _ *cache.Reflector, err error) { logged = append(logged, err) })
	for range 10 {
		handle(t.Context(), nil, unserved)
	}
	require.Equal(t, []error{unserved}, logged, "a kind the member does not serve, repeated")
}

// The Status of a member the caches do not have says so, not "unknown since
// 0001-01-01T00:00:00Z" (what `fleetcache` status printed for a member not in the fleet).
func TestStatusOfNoCache(t *testing.T) {
	require.Equal(t, "no cache of this member (not in the caches' members, or the kind not asked of it yet)", Status{}.String())
}

// Generation moves on with each change of a member's Status, and only then: a repeated failure,
// and the answered requests of a cache that follows its member, leave it as it is.
func TestGenerationFollowsStatusChanges(t *testing.T) {
	var gen atomic.Uint64
	st := newMemberInformer(&gen)
	require.EqualValues(t, 1, gen.Load(), "a member's cache started")
	down := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	st.fail(down)
	require.EqualValues(t, 2, gen.Load(), "a syncing cache's first failure")
	st.fail(down)
	require.EqualValues(t, 2, gen.Load(), "the same failure again")
	st.ok()
	require.EqualValues(t, 3, gen.Load(), "the failure cleared")
	st.synced()
	require.EqualValues(t, 4, gen.Load(), "synced")
	for range 5 {
		st.ok()
	}
	require.EqualValues(t, 4, gen.Load(), "answered requests of a synced cache")
	st.fail(down)
	require.EqualValues(t, 5, gen.Load(), "stale")
	st.fail(errors.New("dial tcp 127.0.0.1:1: i/o timeout"))
	require.EqualValues(t, 6, gen.Load(), "failing anew")
	st.ok()
	require.EqualValues(t, 7, gen.Load(), "following again")
}
