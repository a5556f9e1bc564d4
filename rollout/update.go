package rollout

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	clusterregistryv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Releases is the registry's Releases, as its typed client serves them
// (client.ClusterregistryV1alpha1()).
type Releases = clusterregistryv1alpha1.ReleasesGetter

// update changes Release name as change says, reading it again on a conflict (someone else
// wrote it between the read and the write); change returning false writes nothing.
func update(ctx context.Context, releases Releases, namespace, name string, change func(*v1alpha1.Release) (bool, error)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rel, err := releases.Releases(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("release %s/%s: %w", namespace, name, err)
		}
		write, err := change(rel)
		if err != nil || !write {
			return err
		}
		if _, err := releases.Releases(namespace).Update(ctx, rel, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("release %s/%s: %w", namespace, name, err)
		}
		return nil
	})
}
