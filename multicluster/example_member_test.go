package multicluster_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// ensureConfigMap is a tool's fan-out callback: it creates the tool's ConfigMap where it is
// missing and says what it did.
func ensureConfigMap(ctx context.Context, m *multicluster.Member) (string, error) {
	kube, err := m.Kubernetes(ctx)
	if err != nil {
		return "", err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tool-settings"}}
	switch _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); {
	case apierrors.IsAlreadyExists(err):
		return "unchanged", nil
	case err != nil:
		return "", fmt.Errorf("creating ConfigMap: %w", err)
	}
	return "created", nil
}

// A unit test of a tool's callback, with no registry and no API server: each Member is backed by
// client-go's fake clientset (controller-runtime's fake client goes in Clients.Client). A
// reactor makes one member fail as a real one might.
func ExampleNewMember() {
	cluster := func(name string) *v1alpha1.Cluster {
		return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}
	}
	fresh := fake.NewClientset()
	configured := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tool-settings"}})
	full := fake.NewClientset()
	full.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("configmaps"), "tool-settings", errors.New("quota exceeded"))
	})
	members := []*multicluster.Member{
		multicluster.NewMember(cluster("edge-1"), multicluster.Clients{Kubernetes: fresh}),
		multicluster.NewMember(cluster("edge-2"), multicluster.Clients{Kubernetes: configured}),
		multicluster.NewMember(cluster("edge-3"), multicluster.Clients{Kubernetes: full}),
	}

	results := multicluster.Map(context.Background(), members, ensureConfigMap)
	for _, r := range results {
		fmt.Println(r.Member, r.Value, r.Err)
	}
	// Output:
	// fleet/edge-1 created <nil>
	// fleet/edge-2 unchanged <nil>
	// fleet/edge-3  creating ConfigMap: configmaps "tool-settings" is forbidden: quota exceeded
}
