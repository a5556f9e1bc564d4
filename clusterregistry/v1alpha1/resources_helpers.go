package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Free is what the member's Nodes have free: allocatable less requested, by resource, never
// below zero. Placement's fit and a Release's Capacity division judge room by it.
func (r *ClusterResources) Free() corev1.ResourceList {
	out := make(corev1.ResourceList, len(r.Allocatable))
	for name, a := range r.Allocatable {
		f := a.DeepCopy()
		if q, ok := r.Requested[name]; ok {
			f.Sub(q)
		}
		if f.Sign() < 0 {
			f = resource.Quantity{Format: a.Format}
		}
		out[name] = f
	}
	return out
}
