package tunnel_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// A fleetcache's watch is a stream that lasts, through the tunnel like any connection. When the
// tunnel breaks (the agent restarts), the watch resumes where it was: what changed meanwhile
// arrives once, and nothing seen before is told again or deleted.
func TestAWatchThroughTheTunnelResumes(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 3*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	host, agent, token := r.tunnelledMember(t, ns, memberAddress(t))

	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), resolverFor(t, r.dialer()),
		multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	t.Cleanup(fleet.Stop)
	caches := fleetcache.New(fleet)
	configMaps, err := fleetcache.Typed[*corev1.ConfigMap](caches, corev1.SchemeGroupVersion.WithResource("configmaps"), fleetcache.KindOptions{LabelSelector: "tunnel-test=" + ns})
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[string][]fleetcache.EventType{}
	require.NoError(t, configMaps.AddEventHandler(func(ev fleetcache.Event[*corev1.ConfigMap]) {
		mu.Lock()
		seen[ev.Object.Name] = append(seen[ev.Object.Name], ev.Type)
		mu.Unlock()
	}))
	events := func(name string) []fleetcache.EventType {
		mu.Lock()
		defer mu.Unlock()
		return append([]fleetcache.EventType(nil), seen[name]...)
	}
	require.NoError(t, caches.Start(ctx))
	t.Cleanup(caches.Stop)

	member := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	_, err = member.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = member.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	create := func(name string) {
		_, err := member.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tunnel-test": ns}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create("before")
	require.Eventually(t, func() bool { return len(events("before")) > 0 }, time.Minute, 50*time.Millisecond, "the watch through the tunnel saw nothing")

	require.NoError(t, agent.Process.Kill())
	require.Eventually(t, func() bool { return !r.server.Connected(host) }, time.Minute, 50*time.Millisecond)
	create("during")
	r.startAgent(t, token, host)
	r.waitConnected(t, host)
	create("after")
	require.Eventually(t, func() bool { return len(events("after")) > 0 && len(events("during")) > 0 }, 2*time.Minute, 100*time.Millisecond,
		"the watch did not resume after the tunnel broke")
	require.Equal(t, []fleetcache.EventType{fleetcache.Added}, events("before"), "an object seen before the break was told again")
	require.Equal(t, []fleetcache.EventType{fleetcache.Added}, events("during"))
	require.Equal(t, []fleetcache.EventType{fleetcache.Added}, events("after"))
}
