package delivery

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// CreatedByAnnotation is on a namespace a Release made on a member (spec.createNamespace): the
// Release, as namespace/name. The namespace stays when the Release goes: it may hold what others
// put there since, as Helm's --create-namespace and Argo CD's CreateNamespace leave theirs.
const CreatedByAnnotation = "clusterregistry.k8s.io/created-by-release"

var namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// ensureNamespace makes namespace on the member where it does not exist, for the Release rel;
// one that exists is left as it is, whoever made it. It costs a read per apply, a write only
// when the namespace is missing (writes counts it).
func (mc *memberClients) ensureNamespace(ctx context.Context, namespace string, rel types.NamespacedName, manager string, writes func()) error {
	namespaces := mc.dyn.Resource(namespaceGVR)
	if _, err := namespaces.Get(ctx, namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return err
	}
	writes()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": namespace, "annotations": map[string]any{CreatedByAnnotation: rel.String()}}}}
	_, err := namespaces.Create(ctx, ns, metav1.CreateOptions{FieldManager: manager})
	if apierrors.IsAlreadyExists(err) { // made meanwhile, by someone else or an earlier turn
		return nil
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("creating namespace %s (spec.createNamespace): the member's account may not create namespaces (it lacks create on namespaces): "+
			"join the member with --allow-namespace-creation (join.Options.AllowNamespaceCreation), or create the namespace there: %w", namespace, err)
	}
	if err != nil {
		return fmt.Errorf("creating namespace %s (spec.createNamespace; the member's account must be allowed to create namespaces): %w", namespace, err)
	}
	return nil
}

// createNamespace makes the Release's target namespace on member m when the Release asks for it
// (spec.createNamespace); the error is the member's failure, naming the namespace.
func (c *Controller) createNamespace(ctx context.Context, rel *v1alpha1.Release, m *multicluster.Member, namespace string) *memberError {
	if !rel.Spec.CreateNamespace {
		return nil
	}
	mc, err := c.clients.get(ctx, m)
	if err == nil {
		key := types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}
		err = mc.ensureNamespace(ctx, namespace, key, c.fieldManager(key), func() { c.writes.Add(1) })
	}
	if err != nil {
		return &memberError{class: classify(ctx, err), object: "Namespace " + namespace, err: err}
	}
	return nil
}
