package fake_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	acv1alpha1 "github.com/cluster-registry/sdk/applyconfiguration/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clientset/versioned/fake"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A tool's unit test registers Clusters in a fake registry, by apply as it would in production,
// and reads back which fields its manager owns.
func ExampleNewClientset() {
	ctx := context.Background()
	registry := fake.NewClientset(&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "west"}})
	clusters := registry.ClusterregistryV1alpha1().Clusters("fleet")

	east := acv1alpha1.Cluster("east", "fleet").
		WithLabels(map[string]string{"region": "us-east"}).
		WithSpec(acv1alpha1.ClusterSpec().WithDisplayName("East"))
	got, err := clusters.Apply(ctx, east, metav1.ApplyOptions{FieldManager: "my-tool"})
	if err != nil {
		fmt.Println(err)
		return
	}
	mine, err := acv1alpha1.ExtractCluster(got, "my-tool")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(*mine.Spec.DisplayName, mine.Labels["region"])

	list, _ := clusters.List(ctx, metav1.ListOptions{})
	fmt.Println(len(list.Items), "clusters")
	// Output:
	// East us-east
	// 2 clusters
}
