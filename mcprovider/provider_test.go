package mcprovider_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcmulticluster "sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

const testTimeout = 90 * time.Second

// greetingIndex indexes ConfigMaps by their data's greeting.
const greetingIndex = "data.greeting"

func byGreeting(obj client.Object) []string {
	if g, ok := obj.(*corev1.ConfigMap).Data["greeting"]; ok {
		return []string{g}
	}
	return nil
}

// seen records which cluster's ConfigMaps a controller reconciled.
type seen struct {
	mu   sync.Mutex
	reqs map[mcmulticluster.ClusterName][]string
}

func (s *seen) add(req mcreconcile.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs[req.ClusterName] = append(s.reqs[req.ClusterName], req.Name)
}

func (s *seen) has(cluster mcmulticluster.ClusterName, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.reqs[cluster], name)
}

// watchConfigMaps adds a controller that records each ConfigMap of namespace ns it reconciles.
func watchConfigMaps(t *testing.T, mgr mcmanager.Manager, ns string) *seen {
	t.Helper()
	s := &seen{reqs: map[mcmulticluster.ClusterName][]string{}}
	inNamespace := mcbuilder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns }))
	require.NoError(t, mcbuilder.ControllerManagedBy(mgr).Named("record-"+ns).For(&corev1.ConfigMap{}, inNamespace).
		Complete(mcreconcile.Func(func(_ context.Context, req mcreconcile.Request) (ctrl.Result, error) {
			s.add(req)
			return ctrl.Result{}, nil
		})))
	return s
}

func createConfigMap(t *testing.T, m *localfleet.Member, ns, name, greeting string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(m.Config)
	ctx := fleettest.Context(t, testTimeout)
	if _, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string]string{"greeting": greeting}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// The provider engages the Fleet's members, current and future, with the indexes asked for
// before; engages a member anew, on its new server, when its Cluster points elsewhere; and
// disengages one that leaves, whose objects then reach no controller.
func TestProviderFollowsTheFleet(t *testing.T) {
	fleetmain.Integration(t)
	ctx := fleettest.Context(t, testTimeout)
	m1, m2 := lf.Members[0], lf.Members[1]
	ns := fleettest.CopySet(t, lf, m1.Name)
	provider := mcprovider.New(startFleet(t, ctx, ns), mcprovider.Options{})
	mgr := newManager(t, provider)
	require.NoError(t, mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, greetingIndex, byGreeting))
	reconciled := watchConfigMaps(t, mgr, ns)
	createConfigMap(t, m1, ns, "on-1", "hello-1")
	createConfigMap(t, m2, ns, "on-2", "hello-2")
	run(t, mgr)

	name1 := mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: m1.Name})
	name2 := mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: m2.Name})
	require.Eventually(t, func() bool { return reconciled.has(name1, "on-1") }, testTimeout, 20*time.Millisecond)
	require.Equal(t, []mcmulticluster.ClusterName{name1}, provider.ClusterNames())
	_, err := provider.Get(ctx, name2)
	require.ErrorIs(t, err, mcmulticluster.ErrClusterNotFound)
	requireIndexed(t, ctx, mgr, name1, ns, "hello-1", "on-1")

	// A member that joins mid-run is engaged, with the index asked for before it came.
	fleettest.AddMember(t, lf, ns, m2.Name)
	require.Eventually(t, func() bool { return reconciled.has(name2, "on-2") }, testTimeout, 20*time.Millisecond)
	requireIndexed(t, ctx, mgr, name2, ns, "hello-2", "on-2")

	// member-1's Cluster now points at member-2's server: it is engaged anew, there.
	before, err := provider.Get(ctx, name1)
	require.NoError(t, err)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	c2, err := registry.Get(ctx, m2.Name, metav1.GetOptions{})
	require.NoError(t, err)
	c1, err := registry.Get(ctx, m1.Name, metav1.GetOptions{})
	require.NoError(t, err)
	c1.Spec = c2.Spec
	// member-2 names its kubeconfig Secret by the provider's default, after the Cluster.
	c1.Spec.AuthInfo.Providers[0].Config = map[string]string{"name": m2.Name + "-kubeconfig"}
	_, err = registry.Update(ctx, c1, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return reconciled.has(name1, "on-2") }, testTimeout, 20*time.Millisecond)
	after, err := provider.Get(ctx, name1)
	require.NoError(t, err)
	require.NotSame(t, before, after)
	requireIndexed(t, ctx, mgr, name1, ns, "hello-2", "on-2")

	// member-2 leaves: it is disengaged, and its objects reach no controller.
	fleettest.RemoveMember(t, lf, ns, m2.Name)
	require.Eventually(t, func() bool {
		_, err := provider.Get(ctx, name2)
		return errors.Is(err, mcmulticluster.ErrClusterNotFound)
	}, testTimeout, 20*time.Millisecond)
	require.Equal(t, []mcmulticluster.ClusterName{name1}, provider.ClusterNames())
	createConfigMap(t, m2, ns, "after-leaving", "late")
	// member-1 (on member-2's server) sees it; member-2 itself no longer does.
	require.Eventually(t, func() bool { return reconciled.has(name1, "after-leaving") }, testTimeout, 20*time.Millisecond)
	require.False(t, reconciled.has(name2, "after-leaving"), "a member that left still reached the controller")
}

// requireIndexed lists the engaged cluster's cached ConfigMaps of namespace ns by the greeting
// index (of ns alone: the members are shared, and an earlier run of the test, -count=N, left its
// own).
func requireIndexed(t *testing.T, ctx context.Context, mgr mcmanager.Manager, name mcmulticluster.ClusterName, ns, greeting, want string) {
	t.Helper()
	cl, err := mgr.GetCluster(ctx, name)
	require.NoError(t, err)
	var list corev1.ConfigMapList
	require.NoError(t, cl.GetCache().List(ctx, &list, client.InNamespace(ns), client.MatchingFields{greetingIndex: greeting}))
	require.Len(t, list.Items, 1)
	require.Equal(t, want, list.Items[0].Name)
	require.Empty(t, list.Items[0].ManagedFields, "the cache keeps managed fields, which no controller reads")
}

// A member, or whatever answers at its address, that redirects the engaged cluster's requests
// elsewhere gets nothing sent there: each goes through the member's pinned transport. The other
// members are engaged and reconciled as ever.
func TestRedirectingMemberGetsNoCredentials(t *testing.T) {
	fleetmain.Integration(t)
	ctx := fleettest.Context(t, testTimeout)
	m1 := lf.Members[0]
	ns := fleettest.CopySet(t, lf, m1.Name)
	hostile := fleettest.RedirectingMember(t, lf, ns, "hostile")
	var logged logLines
	provider := mcprovider.New(startFleet(t, ctx, ns), mcprovider.Options{Logger: funcr.New(logged.add, funcr.Options{})})
	mgr := newManager(t, provider)
	reconciled := watchConfigMaps(t, mgr, ns)
	createConfigMap(t, m1, ns, "probe", "hi")
	run(t, mgr)

	name1 := mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: m1.Name})
	require.Eventually(t, func() bool { return reconciled.has(name1, "probe") }, testTimeout, 20*time.Millisecond)
	require.Eventually(t, func() bool { return hostile.Asked() >= 3 }, testTimeout, 20*time.Millisecond,
		"the engaged cluster never asked the hostile member anything")
	require.Empty(t, hostile.Heard(), "the redirect's target heard from the engaged cluster")
	// Why the hostile member is not engaged is logged, naming it, without its token.
	require.Eventually(t, func() bool { return strings.Contains(logged.String(), "refused to follow a 307 redirect") }, testTimeout, 20*time.Millisecond)
	require.Contains(t, logged.String(), ns+"/hostile")
	require.NotContains(t, logged.String(), fleettest.RedirectingToken)
}

// logLines is what a funcr logger wrote.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// A member that accepts connections and never answers does not hold back the others: the
// Provider learns each member's API before engaging it, outside multicluster-runtime's lock, under
// which a controller otherwise waits for one member at a time.
func TestSilentMemberHoldsBackNoOther(t *testing.T) {
	fleetmain.Integration(t)
	ctx := fleettest.Context(t, testTimeout)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	m1 := lf.Members[0]
	ns := fleettest.CopySet(t, lf)
	fleettest.RemoveMember(t, lf, ns, m1.Name)
	fleettest.RemoveMember(t, lf, ns, lf.Members[1].Name)
	fleettest.RegisterServer(t, lf, ns, "silent", "https://"+ln.Addr().String(), m1.Config.CAData, "silent-token")
	provider := mcprovider.New(startFleet(t, ctx, ns), mcprovider.Options{WarmKinds: []client.Object{&corev1.ConfigMap{}}, WarmTimeout: 2 * time.Second})
	mgr := newManager(t, provider)
	reconciled := watchConfigMaps(t, mgr, ns)
	createConfigMap(t, m1, ns, "probe", "hi")
	run(t, mgr)
	time.Sleep(time.Second) // the silent member is being engaged
	fleettest.AddMember(t, lf, ns, m1.Name)
	name1 := mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: m1.Name})
	began := time.Now()
	require.Eventually(t, func() bool { return reconciled.has(name1, "probe") }, testTimeout, 20*time.Millisecond)
	require.Less(t, time.Since(began), 5*time.Second, "member-1 waited behind the silent member")
	require.NotContains(t, provider.ClusterNames(), mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: "silent"}))
}

// Start refuses what it cannot work with, and Get names the cluster it does not know.
func TestProviderRefuses(t *testing.T) {
	resolver, err := access.NewResolver(access.ResolverOptions{})
	require.NoError(t, err)
	members := multicluster.MembersOf(resolver, nil, multicluster.FleetOptions{})
	provider := mcprovider.New(fleettest.Fixed(members), mcprovider.Options{})
	require.ErrorContains(t, provider.Start(context.Background(), nil), "needs a multicluster.Aware")
	_, err = provider.Get(context.Background(), "fleet/nowhere")
	require.ErrorIs(t, err, mcmulticluster.ErrClusterNotFound)
	require.ErrorContains(t, err, "fleet/nowhere")
}

func TestClusterNames(t *testing.T) {
	key := types.NamespacedName{Namespace: "edge", Name: "store-42"}
	name := mcprovider.ClusterName(key)
	require.Equal(t, mcmulticluster.ClusterName("edge/store-42"), name)
	got, ok := mcprovider.MemberKey(name)
	require.True(t, ok)
	require.Equal(t, key, got)
	for _, bad := range []mcmulticluster.ClusterName{"", "edge", "/store", "edge/", "a/b/c"} {
		_, ok := mcprovider.MemberKey(bad)
		require.False(t, ok, "%q", bad)
	}
}
