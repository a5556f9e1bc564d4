package capacity

import corev1 "k8s.io/api/core/v1"

// The caches keep of each object only what Observe reads: a Node's conditions, cordon, capacity
// and allocatable (its images are most of its size); a Pod's Node, phase and what it requests,
// as the scheduler counts it (containers' and init containers' requests, the Pod's own
// resources and overhead), no command, environment or volume.

func keepNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	var ready []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = append(ready, corev1.NodeCondition{Type: c.Type, Status: c.Status})
		}
	}
	n.ManagedFields, n.Annotations = nil, nil
	n.Spec = corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable}
	n.Status = corev1.NodeStatus{Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Conditions: ready}
	return n, nil
}

func keepPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	requests := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy, Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}}
		}
		return out
	}
	p.ManagedFields, p.Annotations, p.Labels = nil, nil, nil
	p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName, Containers: requests(p.Spec.Containers), InitContainers: requests(p.Spec.InitContainers),
		Overhead: p.Spec.Overhead, Resources: p.Spec.Resources}
	p.Status = corev1.PodStatus{Phase: p.Status.Phase}
	return p, nil
}
