package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
