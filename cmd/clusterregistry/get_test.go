package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// The overview shows the members that need attention first.
func TestNotReadyFirst(t *testing.T) {
	member := func(ns, name string, status metav1.ConditionStatus) v1alpha1.Cluster {
		c := v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if status != "" {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status}}
		}
		return c
	}
	clusters := []v1alpha1.Cluster{
		member("a", "ok", metav1.ConditionTrue), member("b", "down", metav1.ConditionFalse),
		member("a", "new", ""), member("a", "also-ok", metav1.ConditionTrue), member("a", "gone", metav1.ConditionUnknown),
	}
	notReadyFirst(clusters)
	var order []string
	for _, c := range clusters {
		order = append(order, c.Namespace+"/"+c.Name)
	}
	require.Equal(t, []string{"a/gone", "a/new", "b/down", "a/also-ok", "a/ok"}, order)
}

// describe shows pointers, never what they point at, and the conditions and Events in order.
func TestDescribeCluster(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	c := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "prod", Labels: map[string]string{"env": "prod"}, CreationTimestamp: metav1.NewTime(now.Add(-48 * time.Hour))},
		Spec: v1alpha1.ClusterSpec{
			DisplayName: "Production",
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://prod.example.com:6443"}},
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "token", Type: v1alpha1.AuthProviderType{Name: "secret"}, Config: map[string]string{"name": "prod-token"}}}},
		},
		Status: v1alpha1.ClusterStatus{Version: "v1.36.3", Conditions: []metav1.Condition{{
			Type: "Ready", Status: metav1.ConditionFalse, Reason: "Unreachable", Message: "dial tcp: refused", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute)),
		}}},
	}
	events := &corev1.EventList{Items: []corev1.Event{
		{Type: "Normal", Reason: "Reachable", Message: "Ready True", LastTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		{Type: "Warning", Reason: "Unreachable", Message: "Ready False", LastTimestamp: metav1.NewTime(now.Add(-time.Minute))},
	}}
	var out bytes.Buffer
	c.Status.CredentialsExpireAt = &metav1.Time{Time: now.Add(5 * time.Hour)}
	tokens := map[string]time.Time{"token": now.Add(-3 * time.Minute)}
	require.NoError(t, describeCluster(&out, c, tokens, events, now))
	t.Log("\n" + out.String())
	require.Regexp(t, `(?m)^Display Name:\s+Production$`, out.String())
	require.Regexp(t, `(?m)^  https://prod.example.com:6443\s+from 0.0.0.0/0$`, out.String())
	require.Regexp(t, `(?m)^  token\s+secret\s+name=prod-token\s+token expires 2026-11-23T11:57:00Z \(expired 3m ago\)$`, out.String())
	require.Regexp(t, `(?m)^  Credentials Expire:\s+2026-11-23T17:00:00Z \(in 5h\), as the health controller last read them$`, out.String())
	require.Regexp(t, `(?m)^  Ready\s+False\s+Unreachable\s+since 60s ago\s+dial tcp: refused$`, out.String())
	require.Regexp(t, `(?s)Normal\s+Reachable.*Warning\s+Unreachable`, out.String(), "events oldest first")
	require.Regexp(t, `(?m)^  not observed: no capacity controller`, out.String())

	// What a capacity controller wrote: each resource requested of allocatable, and what one Node
	// has free; -o wide's columns say the same in short.
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}}
	pods := []*corev1.Pod{{Spec: corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}}}}
	r := capacity.Observe(nodes, pods, now.Add(-30*time.Second))
	c.Status.Resources = &r
	out.Reset()
	require.NoError(t, describeCluster(&out, c, tokens, events, now))
	require.Regexp(t, `(?m)^  Nodes:\s+1, 1 ready and schedulable$`, out.String())
	require.Regexp(t, `(?m)^  cpu:\s+1500m requested of 4\s+2500m free on one Node$`, out.String())
	require.Regexp(t, `(?m)^  Observed:\s+2026-11-23T11:59:30Z \(30s ago\)$`, out.String())
	nodeCells, cpu, memory := held(c.Status.Resources)
	require.Equal(t, []string{"1/1", "1500m/4", "0/16Gi"}, []string{nodeCells, cpu, memory})
}
