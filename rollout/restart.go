package rollout

import (
	"context"
	"time"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Restart asks the releases controller to deliver the Release again now, to every member whose
// wave has begun, by writing the restartedAt annotation (at), as kubectl rollout restart writes
// kubectl.kubernetes.io/restartedAt. The revision does not change; a stop past maxFailures is
// lifted.
func Restart(ctx context.Context, releases Releases, namespace, name string, at time.Time) error {
	return update(ctx, releases, namespace, name, func(rel *v1alpha1.Release) (bool, error) {
		if rel.Annotations == nil {
			rel.Annotations = map[string]string{}
		}
		rel.Annotations[v1alpha1.RestartedAtAnnotation] = at.UTC().Format(time.RFC3339Nano)
		return true, nil
	})
}
