package delivery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/election"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// Two releases controllers of one set, neither sharded (a second process started by hand beside
// the demo's or a Deployment's), take turns on their Lease: the second writes nothing while the
// first holds it, and takes over when the first stops. Without the Lease both applied every
// Release and wrote its status.
func TestUnshardedControllersTakeTurns(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	defer func() { goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, ignore)...) }()
	ns := fleettest.CopySet(t, lf, "member-1")
	withLease := func(id string) func(*delivery.ControllerOptions) {
		return func(o *delivery.ControllerOptions) {
			o.Lease = &election.Lease{Identity: id, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
		}
	}
	leases := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoordinationV1().Leases(ns)
	holder := func() string {
		l, err := leases.Get(t.Context(), delivery.DefaultLeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	first := launchDelivery(t, ns, nil, withLease("first"))
	require.Eventually(t, func() bool { return holder() == "first" }, 20*time.Second, 50*time.Millisecond, "the first controller took no Lease")
	second := launchDelivery(t, ns, nil, withLease("second"))

	first.decide(t, "member-1")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "turns", Namespace: ns}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap("turns-"+ns, map[string]string{"v": "1"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
	}}
	_, err := first.registry.ClusterregistryV1alpha1().Releases(ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	v1 := first.waitRelease(t, "turns", "ready", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 }).Status.Revision
	require.Positive(t, first.ctrl.Writes())
	require.Zero(t, second.ctrl.Writes(), "the second controller acted beside the first")

	first.stop()
	require.Eventually(t, func() bool { return holder() == "second" }, 20*time.Second, 50*time.Millisecond, "the second controller did not take over")
	second.updateRelease(t, ns, "turns", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = manifests(t, configMap("turns-"+ns, map[string]string{"v": "2"}))
	})
	second.waitRelease(t, "turns", "the new revision ready, by the second", func(r *v1alpha1.Release) bool {
		return r.Status.Revision != v1 && r.Status.Ready == 1
	})
	require.Positive(t, second.ctrl.Writes())
	require.NoError(t, second.registry.ClusterregistryV1alpha1().Releases(ns).Delete(t.Context(), "turns", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := second.registry.ClusterregistryV1alpha1().Releases(ns).Get(t.Context(), "turns", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond, "the Release was not removed")
	second.stop()
}

// A Lease's place is the cluster set's, never an option's: a Namespace other than the
// Controller's set is refused, saying so (the command once passed --leader-elect-namespace, and
// two controllers of one set each held a Lease of their own).
func TestLeaseLivesInTheSet(t *testing.T) {
	fleettest.NeedFleet(t, lf)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	decisions := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	_, err := delivery.NewController(fleettest.Fixed(nil), registry, kube, decisions, delivery.ControllerOptions{
		Namespace: "fleet", Lease: &election.Lease{Namespace: "clusterregistry-system"}})
	require.ErrorContains(t, err, `ControllerOptions.Lease.Namespace "clusterregistry-system": a cluster set's Lease lives in the set's own namespace`)
	for _, ns := range []string{"", "fleet"} {
		_, err = delivery.NewController(fleettest.Fixed(nil), registry, kube, decisions, delivery.ControllerOptions{
			Namespace: "fleet", Lease: &election.Lease{Namespace: ns}})
		require.NoError(t, err, "Lease.Namespace %q", ns)
	}
}
