package clusterprofile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A Cluster's status.resources are published as properties, each with the figures' time; a
// Cluster without has none of them.
func TestProfileMirrorsCapacity(t *testing.T) {
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "edge-1"}}
	require.Len(t, clusterprofile.Profile(c, nil, clusterprofile.PublishOptions{}).Status.Properties, 1, "only the cluster set, before capacity is observed")
	at := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	c.Status.Resources = &v1alpha1.ClusterResources{Nodes: 3, ReadyNodes: 2, LastObservedTime: at,
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("12"), corev1.ResourceMemory: resource.MustParse("48Gi")},
		Requested:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5100m")},
		LargestFree: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}
	props := map[string]string{}
	for _, p := range clusterprofile.Profile(c, nil, clusterprofile.PublishOptions{}).Status.Properties {
		props[p.Name] = p.Value
		if p.Name != clusterprofile.PropertyClusterSet {
			require.True(t, p.LastObservedTime.Equal(&at), "%s: observed at %v", p.Name, p.LastObservedTime)
		}
	}
	prefix := clusterprofile.PropertyResourcePrefix
	require.Equal(t, map[string]string{
		clusterprofile.PropertyClusterSet: "fleet", clusterprofile.PropertyNodeCount: "3", clusterprofile.PropertyReadyNodeCount: "2",
		prefix + "allocatable-cpu": "12", prefix + "allocatable-memory": "48Gi", prefix + "requested-cpu": "5100m", prefix + "largest-free-cpu": "3",
	}, props)
}
