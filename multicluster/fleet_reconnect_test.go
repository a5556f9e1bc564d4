package multicluster

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// refused is what a client gets while the registry's API server is down.
var refused = &url.Error{Op: "Get", URL: "https://registry.example:6443/apis", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}

// unavailable is a 503 asking to come back after seconds, as an API server that is starting
// answers (Retry-After: 5).
func unavailable(seconds int32) error {
	err := apierrors.NewServiceUnavailable("the server is starting")
	err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: seconds}
	return err
}

// answers returns a call that gives each error in turn, then succeeds, counting the calls.
func answers(calls *int, errs ...error) func() (string, error) {
	return func() (string, error) {
		*calls++
		if *calls <= len(errs) {
			return "", errs[*calls-1]
		}
		return "listed", nil
	}
}

// A registry coming back from an outage answers 503 with Retry-After: 5 while it starts; the
// Fleet retries at its own reconnection pace, not 5 s later, so that it is current again as soon
// as the registry serves. Before, the 503 went to the informer (client-go's REST client had
// already slept the 5 s inside the call).
func TestUntilConnectedRetriesAStartingRegistryAtItsOwnPace(t *testing.T) {
	f := &Fleet{}
	calls := 0
	start := time.Now()
	v, err := untilConnected(context.Background(), f, answers(&calls, refused, unavailable(5), unavailable(5)))
	require.NoError(t, err)
	require.Equal(t, "listed", v)
	require.Equal(t, 4, calls)
	require.Less(t, time.Since(start), 3*time.Second, "a starting registry's Retry-After was waited out")
	require.NoError(t, f.Status().Err, "current again")

	// Reconnecting after an outage recorded in the status (a new list or watch call after the
	// one that saw the connection go) is coming back too.
	f.observe(refused)
	calls, start = 0, time.Now()
	_, err = untilConnected(context.Background(), f, answers(&calls, unavailable(5)))
	require.NoError(t, err)
	require.Less(t, time.Since(start), 3*time.Second)
}

// A registry that was never lost and answers 503 or 429 is asked again after the delay it
// names, as client-go would; the status says why the view is stale meanwhile.
func TestUntilConnectedWaitsAsAServingRegistryAsks(t *testing.T) {
	f := &Fleet{}
	calls := 0
	start := time.Now()
	errs := []error{unavailable(1)}
	_, err := untilConnected(context.Background(), f, func() (string, error) {
		if calls == 1 {
			require.Error(t, f.Status().Err, "the status says the view is stale while asked to wait")
		}
		return answers(&calls, errs...)()
	})
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "Retry-After: 1 was not honoured")
}

// Any other answer goes back to the informer at once: the Fleet retries only what means "not
// now".
func TestUntilConnectedReturnsOtherErrorsAtOnce(t *testing.T) {
	for _, answer := range []error{
		apierrors.NewForbidden(v1alpha1.Resource("clusters"), "", errors.New("RBAC: not allowed")),
		apierrors.NewResourceExpired("too old resource version"),
	} {
		f := &Fleet{}
		calls := 0
		_, err := untilConnected(context.Background(), f, answers(&calls, refused, answer))
		require.Equal(t, answer, err)
		require.Equal(t, 2, calls)
		require.Equal(t, answer, f.Status().Err)
	}
}

// watchRefusedOnce lists no Cluster and refuses the first watch with the 429 an API server's
// watch cache answers while it initializes (lists meanwhile are served from etcd).
type watchRefusedOnce struct{ watches atomic.Int32 }

func (*watchRefusedOnce) List(context.Context, string, metav1.ListOptions) (*v1alpha1.ClusterList, error) {
	return &v1alpha1.ClusterList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
}

func (s *watchRefusedOnce) Watch(context.Context, string, metav1.ListOptions) (watch.Interface, error) {
	if s.watches.Add(1) == 1 {
		return nil, apierrors.NewTooManyRequests("storage is (re)initializing", 1)
	}
	return watch.NewFake(), nil
}

// A Fleet whose first watch is refused after its list succeeded is synced, stale while the
// watch is refused, and Fresh once it is established. Before, Start left it unsynced for good
// (seen in CI against a registry started a moment before: its new Cluster resource's watch
// cache was still initializing).
func TestFleetIsFreshOnceAWatchRefusedAtStartIsEstablished(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	source := &watchRefusedOnce{}
	fleet := NewFleetFrom(source, newResolver(t, access.ResolverOptions{Secrets: access.SecretsFromClient(fake.NewClientset())}), FleetOptions{})
	require.NoError(t, fleet.Start(context.Background()))
	defer fleet.Stop()
	require.True(t, fleet.Status().Synced, "%v", fleet.Status())
	require.Eventually(t, func() bool { return fleet.Status().Fresh() }, 5*time.Second, 10*time.Millisecond, "%v", fleet.Status())
	require.Equal(t, int32(2), source.watches.Load())
}
