package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cluster-registry/sdk/rollout"
)

// RolloutPauseOptions are rollout pause's and resume's arguments: pause sets spec.suspend,
// resume clears it.
type RolloutPauseOptions struct {
	pause bool
	releaseTarget
}

func newRolloutPause(f *factory, pause bool) *cobra.Command {
	o := &RolloutPauseOptions{pause: pause}
	cmd := &cobra.Command{
		Use:   "pause release/NAME",
		Short: "Pause a Release: nothing is applied to or removed from any member until resume (spec.suspend)",
		Long: `pause sets a Release's spec.suspend, as kubectl rollout pause pauses a Deployment: the releases
controller applies nothing and removes nothing until resume, and the Release says Stalled Suspended.
What runs on the members stays. A Release already paused is an error (exit 1), as kubectl's.`,
		Example:           `  clusterregistry rollout pause release/web -n fleet`,
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		RunE:              runOptions(f, o),
		ValidArgsFunction: rolloutCompletion(f),
	}
	if !pause {
		cmd.Use, cmd.Example = "resume release/NAME", `  clusterregistry rollout resume release/web -n fleet`
		cmd.Short = "Resume a paused Release: its rollout goes on where it stood (clears spec.suspend)"
		cmd.Long = `resume clears a Release's spec.suspend, as kubectl rollout resume resumes a Deployment: the
releases controller delivers it again, from the wave it stood at. A Release not paused is an error
(exit 1), as kubectl's.`
	}
	return cmd
}

// Validate has nothing to refuse that Complete did not.
func (o *RolloutPauseOptions) Validate() error { return nil }

// Run pauses or resumes.
func (o *RolloutPauseOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	releases, verb, change := reg.Clusters.ClusterregistryV1alpha1(), "paused", rollout.Pause
	if !o.pause {
		verb, change = "resumed", rollout.Resume
	}
	if err := change(ctx, releases, reg.Namespace, o.name); err != nil {
		return releaseError(ctx, reg, o.name, err)
	}
	fmt.Fprintf(o.out, "%s %s\n", releaseRef(o.name), verb)
	return nil
}
