package fleetmain

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// Namespace makes a namespace of a generated name on server for tb alone, and deletes it once tb
// ends. A nil server (no fleet under -short) skips tb.
func Namespace(tb testing.TB, server *localfleet.Server) string {
	tb.Helper()
	if server == nil {
		realservers.Required(tb)
	}
	kube := kubernetes.NewForConfigOrDie(server.Config)
	ns, err := kube.CoreV1().Namespaces().Create(tb.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("making a namespace for the test: %v", err)
	}
	tb.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	return ns.Name
}
