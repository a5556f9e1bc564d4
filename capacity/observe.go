package capacity

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Observe is what nodes hold and what pods request of them, observed at now.
func Observe(nodes []*corev1.Node, pods []*corev1.Pod, now time.Time) v1alpha1.ClusterResources {
	r := v1alpha1.ClusterResources{Nodes: int32(len(nodes)), LastObservedTime: metav1.NewTime(now),
		Capacity: corev1.ResourceList{}, Allocatable: corev1.ResourceList{}, Requested: corev1.ResourceList{}}
	used := map[string]corev1.ResourceList{}
	var ready []*corev1.Node
	for _, n := range nodes {
		if !schedulable(n) {
			continue
		}
		ready = append(ready, n)
		used[n.Name] = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
		add(r.Capacity, n.Status.Capacity)
		add(r.Allocatable, n.Status.Allocatable)
	}
	r.ReadyNodes = int32(len(ready))
	for _, p := range pods {
		on := used[p.Spec.NodeName]
		if on == nil || terminal(p) {
			continue // unbound, on a Node that cannot take Pods, or done
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		req[corev1.ResourcePods] = resource.MustParse("1")
		add(on, req)
		add(r.Requested, req)
	}
	if _, ok := r.Requested[corev1.ResourcePods]; !ok {
		r.Requested[corev1.ResourcePods] = resource.MustParse("0")
	}
	r.LargestFree = largestFree(ready, used)
	r.Capacity, r.Allocatable, r.Requested, r.LargestFree = capped(r.Capacity), capped(r.Allocatable), capped(r.Requested), capped(r.LargestFree)
	return r
}

// maxResources is how many resources a list of status.resources holds (the CRD's maxProperties).
const maxResources = 32

// standard are the resources a capped list always keeps.
var standard = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage}

// capped is l within maxResources: the standard resources, then the others by name. A member
// whose Nodes or Pods name more (whatever it answers) would otherwise have its every write
// refused, and no figures at all.
func capped(l corev1.ResourceList) corev1.ResourceList {
	if len(l) <= maxResources {
		return l
	}
	out := corev1.ResourceList{}
	for _, name := range standard {
		if q, ok := l[name]; ok {
			out[name] = q
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l)) {
		if len(out) == maxResources {
			break
		}
		out[name] = l[name]
	}
	return out
}

// schedulable says whether a Node can take Pods now: Ready and not cordoned.
func schedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// terminal says whether a Pod is done: its requests no longer count on its Node.
func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// add adds each quantity of from to into.
func add(into, from corev1.ResourceList) {
	for k, q := range from {
		sum := into[k]
		sum.Add(q)
		into[k] = sum
	}
}

// largestFree is, for each resource, the most of it free (allocatable less used, never below
// zero) on any one ready Node; nil without one. A Pod that asks more of a resource than this
// fits on no Node. A Node with the most of one resource need not have the most of another:
// taking one Node's free (the one with the most cpu, say) would hide the gpus of another, and
// a Placement asking for gpus on one Node would find none.
func largestFree(ready []*corev1.Node, used map[string]corev1.ResourceList) corev1.ResourceList {
	var most corev1.ResourceList
	for _, n := range ready {
		if most == nil {
			most = corev1.ResourceList{}
		}
		for k, q := range n.Status.Allocatable {
			left := q.DeepCopy()
			left.Sub(used[n.Name][k])
			if left.Sign() < 0 {
				left = resource.Quantity{Format: q.Format}
			}
			if m, ok := most[k]; !ok || left.Cmp(m) > 0 {
				most[k] = left
			}
		}
	}
	return most
}

// Share is how much of resource name r's Pods request of what its ready Nodes offer, as
// "requested/allocatable" ("5100m/12"), the form `get -o wide` and fleet-api show.
func Share(r *v1alpha1.ClusterResources, name corev1.ResourceName) string {
	req, alloc := r.Requested[name], r.Allocatable[name]
	return req.String() + "/" + alloc.String()
}
