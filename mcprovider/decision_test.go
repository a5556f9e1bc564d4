package mcprovider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	mcmulticluster "sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// Given a decision's View, a multicluster-runtime controller reconciles only the placed members:
// the one the decision chooses is engaged, the other is not, and when the decision moves, the
// engagement follows it.
func TestProviderFollowsADecision(t *testing.T) {
	fleetmain.Integration(t)
	ctx := fleettest.Context(t, testTimeout)
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(ctx, lf.Registry.Config))
	m1, m2 := lf.Members[0], lf.Members[1]
	ns := fleettest.CopySet(t, lf)
	profiles := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	place := func(name string) {
		t.Helper()
		_, err := decision.Write(ctx, profiles, ns, "web", []decision.Chosen{{Cluster: types.NamespacedName{Namespace: ns, Name: name}}},
			decision.WriteOptions{SchedulerName: "test"})
		require.NoError(t, err)
	}
	place(m1.Name)
	view := decision.NewView(startFleet(t, ctx, ns), profiles, ns, "web", decision.ViewOptions{})
	viewCtx, stopView := context.WithCancel(context.Background())
	viewDone := make(chan error, 1)
	go func() { viewDone <- view.Run(viewCtx) }()
	t.Cleanup(func() { stopView(); require.NoError(t, <-viewDone) })

	provider := mcprovider.New(view, mcprovider.Options{})
	mgr := newManager(t, provider)
	reconciled := watchConfigMaps(t, mgr, ns)
	createConfigMap(t, m1, ns, "on-1", "placed-1")
	createConfigMap(t, m2, ns, "on-2", "placed-2")
	run(t, mgr)

	name1 := mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: m1.Name})
	name2 := mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: m2.Name})
	require.Eventually(t, func() bool { return reconciled.has(name1, "on-1") }, testTimeout, 20*time.Millisecond)
	require.Equal(t, []mcmulticluster.ClusterName{name1}, provider.ClusterNames())
	require.False(t, reconciled.has(name2, "on-2"), "a member the decision did not choose was reconciled")

	// The decision moves to member-2: it is engaged, member-1 disengaged.
	place(m2.Name)
	require.Eventually(t, func() bool { return reconciled.has(name2, "on-2") }, testTimeout, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := provider.Get(ctx, name1)
		return errors.Is(err, mcmulticluster.ErrClusterNotFound)
	}, testTimeout, 20*time.Millisecond)
	require.Equal(t, []mcmulticluster.ClusterName{name2}, provider.ClusterNames())
}
