package multicluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A member's client costs no allocation per call: the zero value memberClient returns on an error
// was moved to the heap on every call, by the error's naming of its type (&zero in a %T), which
// BenchmarkFanOut's profile showed beside every member call.
func TestMemberClientAllocatesNothing(t *testing.T) {
	cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "given"}}
	m := NewMember(cluster, Clients{Kubernetes: kubefake.NewClientset()})
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := m.Kubernetes(ctx); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)

	_, err := NewMember(cluster, Clients{}).Kubernetes(ctx)
	require.EqualError(t, err, "member fleet/given: no kubernetes.Interface client was given to NewMember")
}
