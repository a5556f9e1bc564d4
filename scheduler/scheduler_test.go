package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/placement"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// The scheduler writes each placement's decision, and writes again only when a Cluster that
// matters to it changes the decision: an unrelated join writes nothing, a Ready flap within the
// toleration changes nothing, a member leaving the selector is replaced, a removed placement's
// slices go; while the Fleet is not fresh, nothing is written.
func TestScheduler(t *testing.T) {
	realservers.Required(t)
	defer goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...)
	ctx := t.Context()
	ns := fleettest.NewSet(t, lf)
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	setReady := func(name string, status metav1.ConditionStatus, reason string) {
		t.Helper()
		setClusterReady(t, clusters, name, status, reason)
	}
	for _, n := range []string{"prod-1", "prod-2", "prod-3", "prod-4"} {
		addReadyCluster(t, clusters, n, "prod")
	}
	addReadyCluster(t, clusters, "dev-1", "dev")

	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), nil, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	defer fleet.Stop()
	client := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	s, err := scheduler.New(fleet, client, scheduler.Options{SchedulerName: "clusterregistry", Fresh: func() bool { return fleet.Status().Fresh() }})
	require.NoError(t, err)
	compile := func(p placement.Policy) *placement.Compiled {
		c, err := placement.Compile(p)
		require.NoError(t, err)
		return c
	}
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	web := types.NamespacedName{Namespace: ns, Name: "web"}
	s.Set(scheduler.Placement{Key: web, Policy: compile(placement.Policy{Selector: prod, Count: ptr.To[int32](2),
		Tolerations: []placement.Toleration{{Reason: v1alpha1.ReasonUnreachable, Seconds: ptr.To[int64](300)}}})})
	all := types.NamespacedName{Namespace: ns, Name: "all-prod"}
	s.Set(scheduler.Placement{Key: all, Policy: compile(placement.Policy{Selector: prod, // tolerates no outage
		Tolerations: []placement.Toleration{{Reason: v1alpha1.ReasonUnreachable, Seconds: ptr.To[int64](0)}}})})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { stop(); require.NoError(t, <-done) }()

	waitFor := func(key types.NamespacedName, cond func([]string) bool, what string) []string {
		t.Helper()
		return waitForDecision(t, client, key, cond, what)
	}
	chosenWeb := waitFor(web, func(n []string) bool { return len(n) == 2 }, "two members chosen")
	waitFor(all, func(n []string) bool {
		return slices.Equal(slices.Sorted(slices.Values(n)), []string{"prod-1", "prod-2", "prod-3", "prod-4"})
	}, "every production member")
	version := func(key types.NamespacedName) string { return decisionVersion(t, client, key) }

	// An unrelated Cluster joins: nothing is written. The writes that followed the decisions
	// (their Placements' status) are waited out first: on a loaded machine one was still under
	// way, and counted as the join's.
	settled(t, s)
	writes, webVersion, allVersion := s.Writes(), version(web), version(all)
	addReadyCluster(t, clusters, "dev-2", "dev")
	time.Sleep(time.Second)
	require.Equal(t, writes, s.Writes(), "an unrelated join wrote")
	require.Equal(t, webVersion, version(web))
	require.Equal(t, allVersion, version(all))

	// A chosen member flaps within web's toleration: web's decision stays; all-prod, which
	// tolerates nothing, lets it go and takes it back.
	setReady(chosenWeb[0], metav1.ConditionFalse, v1alpha1.ReasonUnreachable)
	waitFor(all, func(n []string) bool { return len(n) == 3 && !slices.Contains(n, chosenWeb[0]) }, "the Unreachable member out")
	setReady(chosenWeb[0], metav1.ConditionTrue, v1alpha1.ReasonReachable)
	waitFor(all, func(n []string) bool { return len(n) == 4 }, "the member back")
	require.Equal(t, webVersion, version(web), "a flap within the toleration changed the decision")

	// A chosen member leaves the selector: another takes its place, the other stays first.
	_, err = clusters.Patch(ctx, chosenWeb[1], types.MergePatchType, []byte(`{"metadata":{"labels":{"env":"dev"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	now := waitFor(web, func(n []string) bool { return len(n) == 2 && !slices.Contains(n, chosenWeb[1]) }, "the member that left replaced")
	require.Equal(t, chosenWeb[0], now[0])

	// A removed placement's decision goes: no decision, not an empty one.
	s.Remove(web)
	waitForNoDecision(t, client, web)
}

// waitForNoDecision waits, 30 s at most, until key has no decision: not an empty one.
func waitForNoDecision(t *testing.T, client cpversioned.Interface, key types.NamespacedName) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := decision.Read(t.Context(), client, key.Namespace, key.Name)
		if errors.Is(err, decision.ErrNoDecision) {
			return
		}
		require.True(t, time.Now().Before(deadline), "the removed placement's slices stay: %v", err)
	}
}

// setClusterReady sets Cluster name's Ready condition, as the health controller would.
func setClusterReady(t *testing.T, clusters crv1alpha1.ClusterInterface, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	ctx := t.Context()
	c, err := clusters.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	c.Status.Conditions = nil
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: "set by the test",
		LastTransitionTime: metav1.Now()})
	_, err = clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// addReadyCluster registers a Ready Cluster name, labelled env.
func addReadyCluster(t *testing.T, clusters crv1alpha1.ClusterInterface, name, env string) {
	t.Helper()
	_, err := clusters.Create(t.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": env}},
		Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://" + name + ".example:6443"}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	setClusterReady(t, clusters, name, metav1.ConditionTrue, v1alpha1.ReasonReachable)
}

// waitForDecision waits, 30 s at most, until the decision of key satisfies cond, and returns its
// members' names, in its order.
func waitForDecision(t *testing.T, client cpversioned.Interface, key types.NamespacedName, cond func([]string) bool, what string) []string {
	t.Helper()
	read := func() []string {
		d, err := decision.Read(t.Context(), client, key.Namespace, key.Name)
		if err != nil {
			return nil
		}
		var names []string
		for _, c := range d.Clusters {
			names = append(names, c.Name)
		}
		return names
	}
	var got []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got = read(); cond(got) {
			return got
		}
		require.True(t, time.Now().Before(deadline), "%s: %s, decision %v", key.Name, what, got)
	}
}

// decisionVersion is the resourceVersion of key's one PlacementDecision.
func decisionVersion(t *testing.T, client cpversioned.Interface, key types.NamespacedName) string {
	t.Helper()
	list, err := client.ApisV1alpha1().PlacementDecisions(key.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: cpv1alpha1.DecisionKeyLabel + "=" + key.Name})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	return list.Items[0].ResourceVersion
}

// While the members are not fresh (the Fleet has not listed the registry, or lost its watch),
// nothing is decided or written: a failed list never empties a decision.
func TestSchedulerWaitsForFreshMembers(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	ns := fleettest.NewSet(t, lf)
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), nil, multicluster.FleetOptions{Namespaces: []string{ns}})
	client := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	s, err := scheduler.New(fleet, client, scheduler.Options{SchedulerName: "clusterregistry", Fresh: func() bool { return false }})
	require.NoError(t, err)
	c, err := placement.Compile(placement.Policy{})
	require.NoError(t, err)
	s.Set(scheduler.Placement{Key: types.NamespacedName{Namespace: ns, Name: "web"}, Policy: c})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	time.Sleep(1500 * time.Millisecond)
	stop()
	require.NoError(t, <-done)
	_, err = decision.Read(ctx, client, ns, "web")
	require.ErrorIs(t, err, decision.ErrNoDecision, "a decision was written from members that were not fresh")
	require.Zero(t, s.Writes())
}

// settled waits until the scheduler's writes stay as they are for half a second: what its last
// turns queued has been written.
func settled(t *testing.T, s *scheduler.Scheduler) {
	t.Helper()
	require.Eventually(t, func() bool {
		before := s.Writes()
		time.Sleep(500 * time.Millisecond)
		return s.Writes() == before
	}, 30*time.Second, 10*time.Millisecond, "the scheduler kept writing")
}
