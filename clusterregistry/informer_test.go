package clusterregistry_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/informers/externalversions"
)

// The generated informer and lister see Clusters come, change and go, as a controller would.
func TestInformerAndLister(t *testing.T) {
	ctx := testContext(t)
	ns := newNamespace(t)
	client := registryClient(t)
	clusters := client.ClusterregistryV1alpha1().Clusters(ns)

	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(ns))
	informer := factory.Clusterregistry().V1alpha1().Clusters()
	events := make(chan string, 16)
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- "add " + obj.(*v1alpha1.Cluster).Name },
		UpdateFunc: func(_, obj any) { events <- "update " + obj.(*v1alpha1.Cluster).Spec.DisplayName },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			events <- "delete " + obj.(*v1alpha1.Cluster).Name
		},
	}); err != nil {
		t.Fatal(err)
	}
	lister := informer.Lister()
	// Shutdown waits for the informers to stop, so stop them first.
	stopCtx, stop := context.WithCancel(ctx)
	defer factory.Shutdown()
	defer stop()
	factory.Start(stopCtx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache for %v did not sync", typ)
		}
	}

	expect := func(want string) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("event %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("no event, want %q", want)
		}
	}

	c, err := clusters.Create(ctx, newCluster("theta"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect("add theta")
	if got, err := lister.Clusters(ns).Get("theta"); err != nil || got.Spec.DisplayName != "Cluster theta" {
		t.Fatalf("lister after add: %v %v", got, err)
	}

	c.Spec.DisplayName = "Theta v2"
	if _, err := clusters.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("update Theta v2")
	if got, _ := lister.Clusters(ns).Get("theta"); got.Spec.DisplayName != "Theta v2" {
		t.Fatalf("lister after update: %q", got.Spec.DisplayName)
	}
	sel := labels.SelectorFromSet(labels.Set{"env": "test"})
	if all, err := lister.Clusters(ns).List(sel); err != nil || len(all) != 1 {
		t.Fatalf("lister by selector: %d, %v", len(all), err)
	}

	if err := clusters.Delete(ctx, "theta", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("delete theta")
	// The lister reads the informer's store, which the event handler has already seen updated.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, testTimeout, true, func(context.Context) (bool, error) {
		all, err := lister.List(labels.Everything())
		return len(all) == 0, err
	})
	if err != nil {
		t.Fatalf("lister still holds the deleted cluster: %v", err)
	}
}
