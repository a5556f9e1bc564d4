package decision_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// A View follows a decision and the Fleet: members the decision comes to choose are added, those
// it drops or that leave the registry removed; a reference to another set is not followed;
// stopped, it chooses nothing, and leaves no goroutine behind.
func TestView(t *testing.T) {
	realservers.Required(t)
	defer goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...)
	ctx := t.Context()
	ns := fleettest.NewSet(t, lf)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	for _, name := range []string{"a", "b", "c"} {
		_, err := registry.ClusterregistryV1alpha1().Clusters(ns).Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://" + name + ".example:6443"}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	fleet := multicluster.NewFleet(registry, nil, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	defer fleet.Stop()
	client := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	opts := decision.WriteOptions{SchedulerName: "test"}
	pick := func(names ...string) []decision.Chosen {
		var out []decision.Chosen
		for _, n := range names {
			out = append(out, decision.Chosen{Cluster: types.NamespacedName{Namespace: ns, Name: n}})
		}
		return out
	}
	_, err := decision.Write(ctx, client, ns, "web", pick("a", "b", "gone"), opts)
	require.NoError(t, err)

	view := decision.NewView(fleet, client, ns, "web", decision.ViewOptions{})
	var mu sync.Mutex
	var events []string
	unsubscribe := view.Subscribe(func(ev multicluster.MemberEvent) {
		mu.Lock()
		events = append(events, ev.Type.String()+" "+ev.Member.Name().Name)
		mu.Unlock()
	})
	defer unsubscribe()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- view.Run(runCtx) }()
	members := func() string {
		var names []string
		for _, m := range view.Members() {
			names = append(names, m.Name().Name)
		}
		return strings.Join(names, ",")
	}
	waitFor := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool { return members() == want }, 30*time.Second, 20*time.Millisecond, "want %q", want)
	}
	waitFor("a,b") // "gone" is not in the registry

	_, err = decision.Write(ctx, client, ns, "web", pick("a", "c"), opts)
	require.NoError(t, err)
	waitFor("a,c")
	require.NoError(t, registry.ClusterregistryV1alpha1().Clusters(ns).Delete(ctx, "a", metav1.DeleteOptions{}))
	waitFor("c")

	stop()
	require.NoError(t, <-done)
	require.Empty(t, view.Members(), "a stopped view still chooses members")
	want := []string{"Added a", "Added b", "Removed b", "Added c", "Removed a", "Removed c"}
	require.Eventually(t, func() bool { // events are delivered from a goroutine of their own
		mu.Lock()
		defer mu.Unlock()
		return len(events) == len(want)
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, events)
}
