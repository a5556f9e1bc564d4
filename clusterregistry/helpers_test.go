package clusterregistry_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/testcerts"
)

// testTimeout bounds any one wait on the API server; everything here answers in milliseconds.
const testTimeout = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func registryClient(t *testing.T) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(lf.Registry.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newNamespace creates a namespace of the test's own, so tests do not see each other's Clusters.
func newNamespace(t *testing.T) string {
	t.Helper()
	kube, err := kubernetes.NewForConfig(lf.Registry.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := kube.CoreV1().Namespaces().Create(testContext(t),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// newCluster returns a valid Cluster that tests change to suit.
func newCluster(name string) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": "test"}},
		Spec: v1alpha1.ClusterSpec{
			DisplayName: "Cluster " + name,
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
					{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://" + name + ".example.com:6443"},
				},
				CABundle: testCAPEM,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{
				Name:   "controller",
				Type:   v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret},
				Config: map[string]string{"name": name + "-token"},
			}}},
		},
	}
}

var testCAPEM = testcerts.CAPEM()
