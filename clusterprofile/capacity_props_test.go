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

// A member's own properties are published beside the registry's: its cluster.clusterset.k8s.io
// is the profile's ID (in place of the kube-system UID); a claim of another cluster set, or of a
// name the registry's properties own, is not.
func TestProfileMirrorsMemberProperties(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "edge-1"}}
	c.Status.ClusterID = "9f1c2d3e-kube-system"
	id := func() string {
		for _, p := range clusterprofile.Profile(c, nil, clusterprofile.PublishOptions{}).Status.Properties {
			if p.Name == clusterprofile.PropertyClusterID {
				return p.Value
			}
		}
		return ""
	}
	require.Equal(t, "9f1c2d3e-kube-system", id(), "without a property of its own, the kube-system UID")
	c.Status.Properties = []v1alpha1.ClusterStatusProperty{
		{Name: v1alpha1.PropertyClusterID, Value: "edge-1.fleet", LastObservedTime: at},
		{Name: v1alpha1.PropertyClusterSet, Value: "someone-elses-set", LastObservedTime: at},
		{Name: clusterprofile.PropertyNodeCount, Value: "1000", LastObservedTime: at},
		{Name: "site.example.com", Value: "edge-7", LastObservedTime: at},
	}
	props := map[string]string{}
	for _, p := range clusterprofile.Profile(c, nil, clusterprofile.PublishOptions{}).Status.Properties {
		_, dup := props[p.Name]
		require.False(t, dup, "%s published twice", p.Name)
		props[p.Name] = p.Value
	}
	require.Equal(t, map[string]string{clusterprofile.PropertyClusterSet: "fleet", clusterprofile.PropertyClusterID: "edge-1.fleet",
		"site.example.com": "edge-7"}, props)
}
