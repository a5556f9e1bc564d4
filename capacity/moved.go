package capacity

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Moved says whether now's figures moved far enough from written's (nil: none written yet) to
// be written: a Node count changed, a resource appeared or went, or a figure moved by more than
// threshold (a fraction, 0.05 for 5 %) of the resource's allocatable. Pods coming and going move
// requested and largestFree a little at a time, which writes nothing until it adds up.
func Moved(written, now *v1alpha1.ClusterResources, threshold float64) bool {
	if written == nil || now == nil {
		return written != now
	}
	if written.Nodes != now.Nodes || written.ReadyNodes != now.ReadyNodes {
		return true
	}
	for _, lists := range [][2]corev1.ResourceList{
		{written.Capacity, now.Capacity}, {written.Allocatable, now.Allocatable},
		{written.Requested, now.Requested}, {written.LargestFree, now.LargestFree},
	} {
		if listMoved(lists[0], lists[1], written.Allocatable, threshold) {
			return true
		}
	}
	return false
}

// listMoved says whether b moved from a past threshold of base's allocatable, per resource.
func listMoved(a, b, base corev1.ResourceList, threshold float64) bool {
	if len(a) != len(b) {
		return true
	}
	for k, qa := range a {
		qb, ok := b[k]
		if !ok {
			return true
		}
		diff := math.Abs(qb.AsApproximateFloat64() - qa.AsApproximateFloat64())
		of := base[k]
		if diff > 0 && diff > threshold*of.AsApproximateFloat64() {
			return true
		}
	}
	return false
}
