package shard_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/shard"
)

// A tool that registers Clusters itself gives each its bucket before creating it, as
// `clusterregistry join` does, so that a shard group of bucket views watches it only where it is
// owned.
func ExampleSetBucket() {
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "prod-eu-1"}}
	shard.SetBucket(c)
	fmt.Println(c.Labels)
	// Output: map[clusterregistry.k8s.io/shard-bucket:37]
}

// Which replica of a group of bucket views probes a Cluster: every replica computes the same
// answer from the live replicas, whether the Cluster is in a bucket or not.
func ExampleClusterOwner() {
	live := []shard.Peer{{ID: "health-0"}, {ID: "health-1"}, {ID: "health-2"}}
	inBucket := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "prod-eu-1"}}
	shard.SetBucket(inBucket)
	inNone := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "legacy"}}
	fmt.Println(shard.ClusterOwner(inBucket, live), shard.ClusterOwner(inNone, live))
	// Output: health-0 health-2
}
