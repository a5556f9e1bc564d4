package mcprovider_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/multicluster"
)

// A controller that reconciles ConfigMaps on every member of a Fleet: the Provider engages each
// member with the multicluster manager, which starts it.
func ExampleNew() {
	var (
		ctx      context.Context
		registry *rest.Config        // reaches the registry
		fleet    *multicluster.Fleet // multicluster.NewFleet(...)
	)
	// WarmKinds: the kinds the controllers watch, synced on each member before it is engaged.
	provider := mcprovider.New(fleet, mcprovider.Options{WarmKinds: []client.Object{&corev1.ConfigMap{}}})
	mgr, err := mcmanager.New(registry, provider, manager.Options{})
	if err != nil {
		panic(err)
	}
	err = mcbuilder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(mcreconcile.Func(
		func(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
			member, _ := mcprovider.MemberKey(req.ClusterName) // its namespace and name in the registry
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return ctrl.Result{}, err
			}
			var cm corev1.ConfigMap
			err = cl.GetClient().Get(ctx, req.NamespacedName, &cm)
			fmt.Println(member, cm.Name, err)
			return ctrl.Result{}, nil
		}))
	if err != nil {
		panic(err)
	}
	if err := fleet.Start(ctx); err != nil {
		panic(err)
	}
	defer fleet.Stop()
	if err := mgr.Start(ctx); err != nil {
		panic(err)
	}
}

func ExampleClusterName() {
	name := mcprovider.ClusterName(types.NamespacedName{Namespace: "edge", Name: "store-42"})
	member, ok := mcprovider.MemberKey(name)
	fmt.Println(name, member.Name, ok)
	// Output: edge/store-42 store-42 true
}
