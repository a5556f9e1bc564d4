package localfleet_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/localfleet"
)

// A member with workloads runs them as a cluster does: a Deployment becomes Available with its
// Pods Running on simulated Nodes through the real Deployment and ReplicaSet controllers and the
// scheduler; a new image from UnpullableRegistry rolls out Pods that wait in ImagePullBackOff and
// never turn Ready, so the rollout never completes and the old Pods keep serving; and Stop leaves
// none of the processes running.
func TestMemberRunsWorkloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, err := localfleet.Start(ctx, localfleet.Options{Members: 1, Workloads: &localfleet.Workloads{Nodes: 2}})
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			_ = f.Stop()
		}
	}()
	kube := kubernetes.NewForConfigOrDie(f.Members[0].Config)
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 2)
	require.Equal(t, "member-1", nodes.Items[0].Labels[localfleet.RegionLabel])

	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}}}}}
	_, err = kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	start := time.Now()
	require.Eventually(t, func() bool {
		got, err := kube.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.AvailableReplicas == 3 && got.Status.UpdatedReplicas == 3
	}, time.Minute, 100*time.Millisecond, "the Deployment did not become Available")
	t.Logf("Available with 3 replicas %s after it was created", time.Since(start).Round(10*time.Millisecond))
	pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 3)
	for _, p := range pods.Items {
		require.Equal(t, corev1.PodRunning, p.Status.Phase, p.Name)
		require.True(t, strings.HasPrefix(p.Spec.NodeName, "member-1-node-"), "%s scheduled on %q", p.Name, p.Spec.NodeName)
	}

	// A bad image: its Pods are scheduled and wait, never Ready; the old ones keep serving.
	got, err := kube.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	got.Spec.Template.Spec.Containers[0].Image = localfleet.UnpullableRegistry + "/web:2"
	_, err = kube.AppsV1().Deployments("default").Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Waiting != nil && c.State.Waiting.Reason == "ImagePullBackOff" && p.Spec.NodeName != "" {
					return true
				}
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "no Pod of the bad image waits in ImagePullBackOff")
	time.Sleep(3 * time.Second) // long enough for a rollout of good Pods to finish
	got, err = kube.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Positive(t, got.Status.UpdatedReplicas, "no Pod of the bad image was made")
	require.False(t, got.Status.UpdatedReplicas == 3 && got.Status.AvailableReplicas == 3 && got.Status.Replicas == 3, "the bad image's rollout completed: %+v", got.Status)
	require.Zero(t, readyOf(t, kube, got), "a Pod of the bad image turned Ready")
	require.GreaterOrEqual(t, got.Status.AvailableReplicas, int32(2), "the old Pods stopped serving")

	pids := children("kube-controller-manager", "kube-scheduler", "kwok")
	require.Len(t, pids, 3, "kube-controller-manager, kube-scheduler and kwok")
	require.NoError(t, f.Stop())
	stopped = true
	for _, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "process %d still runs after Stop", pid)
	}
}

// readyOf counts the ready Pods of the Deployment's newest image.
func readyOf(t *testing.T, kube kubernetes.Interface, d *appsv1.Deployment) int {
	pods, err := kube.CoreV1().Pods(d.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	n := 0
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image != d.Spec.Template.Spec.Containers[0].Image {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}
