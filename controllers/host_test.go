package controllers_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/controllers"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

func resolver(t *testing.T) *access.Resolver {
	r, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config))})
	require.NoError(t, err)
	return r
}

// startManager starts mgr; stop stops it, and fails the test unless it stops cleanly within 20 s.
func startManager(t *testing.T, mgr manager.Manager) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return ctx, func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("the Manager did not stop")
		}
	}
}

// A tool hosts the SDK's controllers in its own Manager, beside a controller of its own: the
// health controller probes the set's members and writes their status, the capacity controller their resources, the tool's reconciler
// reconciles its ConfigMap and reads the host's Fleet, readiness waits for the Fleet, and the
// Manager's stop stops everything.
func TestHostBesideAToolsOwnController(t *testing.T) {
	ignore := append([]goleak.Option{goleak.IgnoreCurrent()}, fleetmain.IgnoreIdleConnections...)
	defer goleak.VerifyNone(t, ignore...)
	ns := fleettest.CopySet(t, lf)
	host, err := controllers.New(controllers.Options{
		Config: lf.Registry.Config, Resolver: resolver(t), Namespaces: []string{ns},
		Health:   &health.Options{Interval: 300 * time.Millisecond, FailureThreshold: 1, SuccessThreshold: 1},
		Rotation: &rotation.Options{},
		Capacity: &capacity.Options{Interval: 200 * time.Millisecond, Logger: testr.New(t)},
	})
	require.NoError(t, err)
	require.Equal(t, []string{controllers.Health, controllers.Rotation, controllers.Capacity}, host.Controllers())

	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	mgr, err := manager.New(lf.Registry.Config, manager.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		GracefulShutdownTimeout: ptr.To(10 * time.Second),
		// controller-runtime keeps controllers' names per process; go test -count runs this again.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}})
	require.NoError(t, err)
	require.NoError(t, host.AddToManager(mgr))
	// The tool's own controller: it reconciles its ConfigMaps and counts the host's members.
	var reconciled, membersSeen atomic.Int32
	require.NoError(t, builder.ControllerManagedBy(mgr).Named("tools-own").For(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if req.Namespace == ns && req.Name == "tools-own" {
				reconciled.Add(1)
				membersSeen.Store(int32(len(host.Fleet().Members())))
			}
			return reconcile.Result{}, nil
		})))
	require.Error(t, host.Ready(&http.Request{}), "ready before the Fleet has listed the registry")

	ctx, stop := startManager(t, mgr)
	defer stop()

	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	require.Eventually(t, func() bool {
		list, err := clusters.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != len(lf.Members) {
			return false
		}
		for _, c := range list.Items {
			// Health's status and capacity's resources, each its own field manager's, side by side.
			if cond := c.Status.Condition(v1alpha1.ConditionReady); cond == nil || c.Status.LastProbeTime == nil || c.Status.Resources == nil {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "the hosted health and capacity controllers wrote no status")
	require.NoError(t, host.Ready(&http.Request{}))

	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools-own"}}
	require.NoError(t, mgr.GetClient().Create(ctx, c))
	require.Eventually(t, func() bool { return reconciled.Load() > 0 }, 30*time.Second, 50*time.Millisecond, "the tool's own controller never ran")
	require.EqualValues(t, len(lf.Members), membersSeen.Load(), "the tool's controller did not see the host's Fleet")
	require.NoError(t, client.IgnoreNotFound(mgr.GetClient().Delete(ctx, c)))
}

// A controller whose CRD the registry does not serve is refused by New, before anything runs,
// with an error that names it and says the registry (not the options) is what lacks; options that
// cannot work are Invalid.
func TestNewRefusesWhatCannotRun(t *testing.T) {
	ns := fleettest.NewSet(t, lf)
	base := controllers.Options{Config: lf.Registry.Config, Resolver: resolver(t), Namespaces: []string{ns}}

	withProfiles := base
	withProfiles.ClusterProfiles = &clusterprofile.PublishOptions{}
	_, err := controllers.New(withProfiles)
	var cerr *controllers.ControllerError
	require.True(t, errors.As(err, &cerr), "%v", err)
	require.Equal(t, controllers.ClusterProfiles, cerr.Controller)
	require.False(t, cerr.Invalid)
	require.ErrorIs(t, err, clusterprofile.ErrNotServed)

	withPlacements := base
	withPlacements.Placements = &scheduler.ControllerOptions{}
	_, err = controllers.New(withPlacements)
	require.True(t, errors.As(err, &cerr), "%v", err)
	require.Equal(t, controllers.Placements, cerr.Controller)
	require.Contains(t, cerr.Error(), "placementdecisions")

	withReleases := base
	withReleases.Releases = &delivery.ControllerOptions{}
	_, err = controllers.New(withReleases)
	require.True(t, errors.As(err, &cerr), "%v", err)
	require.Equal(t, controllers.Releases, cerr.Controller)
	require.False(t, cerr.Invalid)
	require.Contains(t, cerr.Error(), "placementdecisions")

	bad := base
	bad.Health = &health.Options{FailureThreshold: -1}
	_, err = controllers.New(bad)
	require.True(t, errors.As(err, &cerr), "%v", err)
	require.Equal(t, controllers.Health, cerr.Controller)
	require.True(t, cerr.Invalid, "%v", err)

	_, err = controllers.New(controllers.Options{Config: lf.Registry.Config})
	require.ErrorContains(t, err, "Resolver are required")

	// A replica that watches only what it owns has no Fleet of every member to decide
	// placements or judge Releases' waves over; and only a shard group's replicas own.
	owned := base
	owned.WatchOwned = true
	_, err = controllers.New(owned)
	require.ErrorContains(t, err, "WatchOwned needs Options.Shard")
	owned.Shard = &shard.PeerOptions{Namespace: ns, Group: "g"}
	owned.Placements = &scheduler.ControllerOptions{}
	_, err = controllers.New(owned)
	require.ErrorContains(t, err, "placements and releases weigh every member")
	owned.Placements, owned.Health = nil, &health.Options{}
	host, err := controllers.New(owned)
	require.NoError(t, err)
	require.Nil(t, host.Fleet(), "a replica that watches only what it owns has no Fleet of every member")
}

// One replica of a shard group that watches only the Clusters it owns, in a Manager: with the
// group to itself it owns every bucket and every Cluster in none, probes them all (one member
// labelled with its bucket, one in no bucket), and is ready once its view follows the registry.
func TestHostWatchingOwnedMembers(t *testing.T) {
	ignore := append([]goleak.Option{goleak.IgnoreCurrent()}, fleetmain.IgnoreIdleConnections...)
	defer goleak.VerifyNone(t, ignore...)
	ns := fleettest.CopySet(t, lf)
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	list, err := clusters.List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(list.Items), 2)
	labelled := list.Items[0]
	shard.SetBucket(&labelled)
	_, err = clusters.Update(t.Context(), &labelled, metav1.UpdateOptions{})
	require.NoError(t, err)

	host, err := controllers.New(controllers.Options{
		Config: lf.Registry.Config, Resolver: resolver(t), Namespaces: []string{ns},
		Health:     &health.Options{Interval: 300 * time.Millisecond, FailureThreshold: 1, SuccessThreshold: 1},
		Shard:      &shard.PeerOptions{Namespace: ns, Group: "probers", RenewPeriod: 500 * time.Millisecond, LeaseDuration: 3 * time.Second},
		WatchOwned: true,
	})
	require.NoError(t, err)
	mgr, err := manager.New(lf.Registry.Config, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"},
		GracefulShutdownTimeout: ptr.To(10 * time.Second)})
	require.NoError(t, err)
	require.NoError(t, host.AddToManager(mgr))
	require.Error(t, host.Ready(&http.Request{}), "ready before the view has listed the registry")

	ctx, stop := startManager(t, mgr)
	defer stop()
	require.Eventually(t, func() bool {
		list, err := clusters.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, c := range list.Items {
			if c.Status.LastProbeTime == nil {
				return false
			}
		}
		return len(host.Members().Members()) == len(list.Items)
	}, 60*time.Second, 100*time.Millisecond, "the replica did not own and probe every member")
	// A member is owned, and may be probed, as soon as its Fleet's list adds it, which is before
	// that Fleet has seen its whole list (Start polls for it every 100 ms): readiness follows.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, host.Ready(&http.Request{}), "the replica owns and probes every member but is not ready")
	}, 10*time.Second, 20*time.Millisecond)
}
