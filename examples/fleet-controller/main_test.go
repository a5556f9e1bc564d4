package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcmulticluster "sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// lf is the package's local fleet, shared by its tests.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	fleetmain.Main(m, &lf, localfleet.Options{Members: 2}, nil)
}

const testTimeout = 90 * time.Second

// ignoreEngagedSources is multicluster-runtime's goroutine per watch per engagement, which waits
// for the manager to stop rather than for the cluster to be disengaged.
var ignoreEngagedSources = goleak.IgnoreTopFunction("sigs.k8s.io/multicluster-runtime/pkg/controller.(*mcController[...].func2.1")

// membershipOf is the member's membership ConfigMap for cluster set ns, or nil.
func membershipOf(t *testing.T, m *localfleet.Member, ns string) *corev1.ConfigMap {
	t.Helper()
	cm, err := kubernetes.NewForConfigOrDie(m.Config).CoreV1().ConfigMaps(membershipNamespace).Get(fleettest.Context(t, testTimeout), membershipName(ns), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return cm
}

func deleteMembership(t *testing.T, m *localfleet.Member, ns string) {
	t.Helper()
	err := kubernetes.NewForConfigOrDie(m.Config).CoreV1().ConfigMaps(membershipNamespace).Delete(fleettest.Context(t, testTimeout), membershipName(ns), metav1.DeleteOptions{})
	require.NoError(t, client.IgnoreNotFound(err))
}

// The controller keeps each member's membership ConfigMap: on the member there at the start, on
// a member that joins mid-run, and back after it is deleted; a member that leaves is disengaged,
// with none of its goroutines left, and is no longer reconciled.
func TestMembershipAcrossTheFleet(t *testing.T) {
	realservers.Required(t)
	t.Cleanup(func() { goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...) })
	m1, m2 := lf.Members[0], lf.Members[1]
	ns := fleettest.CopySet(t, lf, m1.Name)
	a := startApp(t, nil, "-n", ns)
	require.Eventually(t, func() bool { return membershipOf(t, m1, ns) != nil }, testTimeout, 50*time.Millisecond)
	require.Equal(t, map[string]string{"clusterSet": ns, "name": m1.Name, "displayName": "Local member 1"}, membershipOf(t, m1, ns).Data)
	require.Equal(t, ns, membershipOf(t, m1, ns).Labels[clusterSetLabel])
	require.Nil(t, membershipOf(t, m2, ns), "a member outside the cluster set was reconciled")
	deleteMembership(t, m1, ns)
	require.Eventually(t, func() bool { return membershipOf(t, m1, ns) != nil }, testTimeout, 50*time.Millisecond, "a deleted ConfigMap was not put back")

	// member-2 joins mid-run, and leaves.
	before := goleak.IgnoreCurrent()
	fleettest.AddMember(t, lf, ns, m2.Name)
	require.Eventually(t, func() bool { return membershipOf(t, m2, ns) != nil }, testTimeout, 50*time.Millisecond)
	require.Equal(t, m2.Name, membershipOf(t, m2, ns).Data["name"])
	fleettest.RemoveMember(t, lf, ns, m2.Name)
	name2 := mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: m2.Name})
	require.Eventually(t, func() bool {
		_, err := a.provider.Get(context.Background(), name2)
		return errors.Is(err, mcmulticluster.ErrClusterNotFound)
	}, testTimeout, 50*time.Millisecond)
	// Everything started for member-2 has ended: its cluster, caches and watches. Left aside is
	// one goroutine per watch per engagement that multicluster-runtime v0.24.1's controller
	// starts (startWithinContext) and ends only when the manager stops; it holds no cluster.
	require.NoError(t, goleak.Find(append(fleetmain.IgnoreIdleConnections, before, ignoreEngagedSources)...))
	deleteMembership(t, m2, ns)
	deleteMembership(t, m1, ns)
	require.Eventually(t, func() bool { return membershipOf(t, m1, ns) != nil }, testTimeout, 50*time.Millisecond)
	require.Nil(t, membershipOf(t, m2, ns), "a member that left was reconciled")
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

// startApp runs the controller with args until the test ends; what it logs goes to log.
func startApp(t *testing.T, log *syncBuffer, args ...string) *app {
	t.Helper()
	opts, err := parseFlags(append([]string{"--kubeconfig", lf.Registry.Kubeconfig}, args...), &bytes.Buffer{})
	require.NoError(t, err)
	opts.skipNameValidation = true
	if log != nil {
		opts.log = funcr.New(func(prefix, args string) { log.WriteString(prefix + " " + args + "\n") }, funcr.Options{})
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := newApp(ctx, opts)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return a
}

// syncBuffer is a log both the controller and the test use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A member joined into two cluster sets, followed with -A, has one object per set, each naming
// its own entry, and they settle: no write once both say what they should. Before, the two
// entries wrote one object in turn, about 230 times a second.
func TestMemberInTwoSets(t *testing.T) {
	realservers.Required(t)
	m1 := lf.Members[0]
	ns1 := fleettest.CopySet(t, lf, m1.Name)
	ns2 := fleettest.CopySet(t, lf, m1.Name)
	startApp(t, nil, "-A")
	for _, ns := range []string{ns1, ns2} {
		require.Eventually(t, func() bool {
			cm := membershipOf(t, m1, ns)
			return cm != nil && cm.Data["clusterSet"] == ns && cm.Data["name"] == m1.Name
		}, testTimeout, 50*time.Millisecond, "cluster set %s", ns)
	}
	before := []string{membershipOf(t, m1, ns1).ResourceVersion, membershipOf(t, m1, ns2).ResourceVersion}
	time.Sleep(3 * time.Second)
	after := []string{membershipOf(t, m1, ns1).ResourceVersion, membershipOf(t, m1, ns2).ResourceVersion}
	require.Equal(t, before, after, "the membership objects were rewritten after they settled")
}

// Two entries of one cluster set for the same member (joined twice, under two names) write one
// object in turn: the controller notices the fight, says so, naming the object and the other
// entry, and stops writing it for a while instead of rewriting it for ever.
func TestFightIsNoticed(t *testing.T) {
	realservers.Required(t)
	m1 := lf.Members[0]
	ns := fleettest.CopySet(t, lf, m1.Name)
	ctx := fleettest.Context(t, testTimeout)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	c, err := registry.Clusters(ns).Get(ctx, m1.Name, metav1.GetOptions{})
	require.NoError(t, err)
	c.ObjectMeta = metav1.ObjectMeta{Name: "again", Namespace: ns}
	_, err = registry.Clusters(ns).Create(ctx, c, metav1.CreateOptions{})
	require.NoError(t, err)

	var log syncBuffer
	startApp(t, &log, "-n", ns)
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "another writer keeps changing") }, testTimeout, 50*time.Millisecond)
	line := log.String()
	require.Contains(t, line, membershipNamespace+"/"+membershipName(ns))
	require.Contains(t, line, "in the registry twice")
	// Both entries hold their writes once each has seen the fight: the object settles.
	require.Eventually(t, func() bool {
		before := membershipOf(t, m1, ns).ResourceVersion
		time.Sleep(2 * time.Second)
		return membershipOf(t, m1, ns).ResourceVersion == before
	}, 20*time.Second, 10*time.Millisecond, "the object kept being rewritten after the fight was noticed")
}
