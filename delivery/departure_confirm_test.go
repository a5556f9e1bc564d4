package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clientset/versioned/fake"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A member the pass saw leave while Ready is removed only if the registry, read again, says its
// Cluster is Ready (or gone): one the controller's watch had not yet seen turn NotReady is put
// off a second, not removed. Members already judged (gone, being removed, at their grace's end)
// are not read again.
func TestConfirmDeliberate(t *testing.T) {
	cluster := func(name string, ready metav1.ConditionStatus) *v1alpha1.Cluster {
		c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}
		c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: ready, Reason: "Test"})
		return c
	}
	registry := fake.NewClientset(cluster("ready", metav1.ConditionTrue), cluster("unready", metav1.ConditionFalse))
	c := &Controller{registry: registry}
	k := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "fleet", Name: name} }
	s := snapshot{
		health: map[types.NamespacedName]memberHealth{k("ready"): {ready: true}, k("unready"): {ready: true}, k("deleted"): {ready: true},
			k("gone"): {gone: true}, k("removing"): {ready: true}},
		own: map[types.NamespacedName]view{k("removing"): {removing: true}},
	}
	kept, wait := c.confirmDeliberate(context.Background(), s, []types.NamespacedName{k("ready"), k("unready"), k("deleted"), k("gone"), k("removing")}, 0)
	require.Equal(t, []types.NamespacedName{k("ready"), k("deleted"), k("gone"), k("removing")}, kept)
	require.Equal(t, time.Second, wait, "a member put off is looked at again within a second")
	gets := 0
	for _, a := range registry.Actions() {
		if a.GetVerb() == "get" {
			gets++
		}
	}
	require.Equal(t, 3, gets, "only the members seen leaving while Ready are read again")

	kept, wait = c.confirmDeliberate(context.Background(), s, []types.NamespacedName{k("ready")}, 5*time.Second)
	require.Equal(t, []types.NamespacedName{k("ready")}, kept)
	require.Equal(t, 5*time.Second, wait)
}
