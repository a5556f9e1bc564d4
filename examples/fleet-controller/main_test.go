package main

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcmulticluster "sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// lf is the package's local fleet, shared by its tests.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	fleettest.Main(m, &lf, localfleet.Options{Members: 2}, nil)
}

const testTimeout = 90 * time.Second

// ignoreEngagedSources is multicluster-runtime's goroutine per watch per engagement, which waits
// for the manager to stop rather than for the cluster to be disengaged.
var ignoreEngagedSources = goleak.IgnoreTopFunction("sigs.k8s.io/multicluster-runtime/pkg/controller.(*mcController[...].func2.1")

// membershipOf is the member's membership ConfigMap, or nil.
func membershipOf(t *testing.T, m *localfleet.Member) *corev1.ConfigMap {
	t.Helper()
	cm, err := kubernetes.NewForConfigOrDie(m.Config).CoreV1().ConfigMaps(membershipNamespace).Get(fleettest.Context(t, testTimeout), membershipName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return cm
}

func deleteMembership(t *testing.T, m *localfleet.Member) {
	t.Helper()
	err := kubernetes.NewForConfigOrDie(m.Config).CoreV1().ConfigMaps(membershipNamespace).Delete(fleettest.Context(t, testTimeout), membershipName, metav1.DeleteOptions{})
	require.NoError(t, client.IgnoreNotFound(err))
}

// The controller keeps each member's membership ConfigMap: on the member there at the start, on
// a member that joins mid-run, and back after it is deleted; a member that leaves is disengaged,
// with none of its goroutines left, and is no longer reconciled.
func TestMembershipAcrossTheFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kube-apiserver and etcd; run without -short")
	}
	t.Cleanup(func() { goleak.VerifyNone(t, append(fleettest.IgnoreIdleConnections, goleak.IgnoreCurrent())...) })
	m1, m2 := lf.Members[0], lf.Members[1]
	for _, m := range lf.Members {
		deleteMembership(t, m)
	}
	ns := fleettest.CopySet(t, lf, m1.Name)
	opts, err := parseFlags([]string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns}, &bytes.Buffer{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	a, err := newApp(ctx, opts)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	require.Eventually(t, func() bool { return membershipOf(t, m1) != nil }, testTimeout, 50*time.Millisecond)
	require.Equal(t, map[string]string{"clusterSet": ns, "name": m1.Name, "displayName": "Local member 1"}, membershipOf(t, m1).Data)
	require.Nil(t, membershipOf(t, m2), "a member outside the cluster set was reconciled")
	deleteMembership(t, m1)
	require.Eventually(t, func() bool { return membershipOf(t, m1) != nil }, testTimeout, 50*time.Millisecond, "a deleted ConfigMap was not put back")

	// member-2 joins mid-run, and leaves.
	before := goleak.IgnoreCurrent()
	fleettest.AddMember(t, lf, ns, m2.Name)
	require.Eventually(t, func() bool { return membershipOf(t, m2) != nil }, testTimeout, 50*time.Millisecond)
	require.Equal(t, m2.Name, membershipOf(t, m2).Data["name"])
	fleettest.RemoveMember(t, lf, ns, m2.Name)
	name2 := mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: m2.Name})
	require.Eventually(t, func() bool {
		_, err := a.provider.Get(ctx, name2)
		return errors.Is(err, mcmulticluster.ErrClusterNotFound)
	}, testTimeout, 50*time.Millisecond)
	// Everything started for member-2 has ended: its cluster, caches and watches. Left aside is
	// one goroutine per watch per engagement that multicluster-runtime v0.24.1's controller
	// starts (startWithinContext) and ends only when the manager stops; it holds no cluster.
	require.NoError(t, goleak.Find(append(fleettest.IgnoreIdleConnections, before, ignoreEngagedSources)...))
	deleteMembership(t, m2)
	deleteMembership(t, m1)
	require.Eventually(t, func() bool { return membershipOf(t, m1) != nil }, testTimeout, 50*time.Millisecond)
	require.Nil(t, membershipOf(t, m2), "a member that left was reconciled")
}

// Usage errors exit 2, naming the flag.
func TestUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"--no-such-flag"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "no-such-flag")
	stdout.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"--help"}, &stdout, &stderr))
	require.Contains(t, stdout.String(), "fleet-controller -n fleet")
}
