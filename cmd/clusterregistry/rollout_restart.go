package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/rollout"
)

// RolloutRestartOptions are rollout restart's arguments.
type RolloutRestartOptions struct {
	releaseTarget
	now func() time.Time
}

func newRolloutRestart(f *factory) *cobra.Command {
	o := &RolloutRestartOptions{now: time.Now}
	return &cobra.Command{
		Use:   "restart release/NAME",
		Short: "Deliver a Release again now to every member whose wave has begun (sync now)",
		Long: `restart asks the releases controller to deliver a Release again now: every member whose wave
has begun gets its objects applied again (what was changed by hand is put back, whatever the drift
policy), and members whose apply failed are tried at once. It writes the
` + v1alpha1.RestartedAtAnnotation + ` annotation, as kubectl rollout restart writes
kubectl.kubernetes.io/restartedAt; the revision does not change.`,
		Example:           `  clusterregistry rollout restart release/web -n fleet`,
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		RunE:              runOptions(f, o),
		ValidArgsFunction: rolloutCompletion(f),
	}
}

// Validate has nothing to refuse that Complete did not.
func (o *RolloutRestartOptions) Validate() error { return nil }

// Run writes the annotation.
func (o *RolloutRestartOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	if err := rollout.Restart(ctx, reg.Clusters.ClusterregistryV1alpha1(), reg.Namespace, o.name, o.now()); err != nil {
		return releaseError(ctx, reg, o.name, err)
	}
	fmt.Fprintf(o.out, "%s restarted\n", releaseRef(o.name))
	return nil
}
