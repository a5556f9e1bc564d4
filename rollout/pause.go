package rollout

import (
	"context"
	"fmt"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Pause sets the Release's spec.suspend, as kubectl rollout pause pauses a Deployment: the
// releases controller applies and removes nothing until Resume; what runs on the members stays.
// A Release already paused is refused, as kubectl refuses it.
func Pause(ctx context.Context, releases Releases, namespace, name string) error {
	return suspend(ctx, releases, namespace, name, true)
}

// Resume clears spec.suspend: the rollout goes on from the wave it stood at. A Release not
// paused is refused.
func Resume(ctx context.Context, releases Releases, namespace, name string) error {
	return suspend(ctx, releases, namespace, name, false)
}

func suspend(ctx context.Context, releases Releases, namespace, name string, pause bool) error {
	return update(ctx, releases, namespace, name, func(rel *v1alpha1.Release) (bool, error) {
		switch {
		case pause && rel.Spec.Suspend:
			return false, &RefusedError{Message: Ref(name) + " is already paused"}
		case !pause && !rel.Spec.Suspend:
			return false, &RefusedError{Message: fmt.Sprintf("%s is not paused", Ref(name))}
		}
		rel.Spec.Suspend = pause
		return true, nil
	})
}
