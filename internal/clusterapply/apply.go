package clusterapply

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// What Apply did to a Cluster, in kubectl apply's words.
const (
	Created    = "created"
	Configured = "configured"
	Unchanged  = "unchanged"
)

// Apply applies c as fieldManager (forcing conflicts if force; checking without storing if
// dryRun), and returns the Cluster as the registry has it after, and whether it was Created,
// Configured or left Unchanged.
func Apply(ctx context.Context, client versioned.Interface, c *v1alpha1.Cluster, fieldManager string, dryRun, force bool) (*v1alpha1.Cluster, string, error) {
	clusters := client.ClusterregistryV1alpha1().Clusters(c.Namespace)
	before, err := clusters.Get(ctx, c.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		before = nil
	case err != nil:
		return nil, "", err
	}
	data, err := json.Marshal(c)
	if err != nil {
		return nil, "", err
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	after, err := clusters.Patch(ctx, c.Name, types.ApplyPatchType, data, opts)
	if err != nil {
		return nil, "", err
	}
	switch {
	case before == nil:
		return after, Created, nil
	case before.ResourceVersion != after.ResourceVersion:
		return after, Configured, nil
	}
	return after, Unchanged, nil
}
