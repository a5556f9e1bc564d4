package fleetcache_test

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/multicluster"
)

// A tool that answers "what runs where" caches each member's Nodes and Deployments once, and
// reads them as often as it likes, each object named with its member; a member that is down is
// reported as stale since when, with what it held then. (It needs running members, so it is
// compiled but not run; cmd/fleet-api is the whole tool, tested against a local fleet.)
func Example() {
	ctx := context.Background()
	var fleet *multicluster.Fleet // multicluster.NewFleet(registry, resolver, opts), started

	caches := fleetcache.New(fleet)
	nodes, err := fleetcache.Typed[*corev1.Node](caches, corev1.SchemeGroupVersion.WithResource("nodes"), fleetcache.KindOptions{
		// Keep only what the tool reads: a Node's image list is most of its size.
		Transform: func(obj any) (any, error) {
			if n, ok := obj.(*corev1.Node); ok {
				n.Status.Images = nil
			}
			return obj, nil
		},
	})
	if err != nil {
		panic(err)
	}
	deployments, err := fleetcache.Typed[*appsv1.Deployment](caches, appsv1.SchemeGroupVersion.WithResource("deployments"), fleetcache.KindOptions{})
	if err != nil {
		panic(err)
	}
	// One handler for every member, current and future.
	_ = deployments.AddEventHandler(func(ev fleetcache.Event[*appsv1.Deployment]) {
		fmt.Println(ev.Type, ev.Member, ev.Object.Namespace+"/"+ev.Object.Name)
	})
	if err := caches.Start(ctx); err != nil {
		panic(err)
	}
	defer caches.Stop()

	// Each member gets 30 seconds; one that is down holds up no other, and is named.
	if err := nodes.WaitForCacheSync(ctx, 30*time.Second); err != nil {
		fmt.Println(err) // nodes (v1, typed): 1 members not synced: fleet/edge-3 (syncing since ...: ...)
	}
	for _, item := range nodes.ListAll(labels.Everything()) {
		fmt.Println(item.Member, item.Object.Name)
	}
	for member, st := range nodes.Statuses() {
		if !st.Fresh() {
			fmt.Println(member, st) // fleet/edge-2 stale since 2026-11-24T07:00:00Z: ...
		}
	}
}
