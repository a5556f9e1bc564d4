package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cluster-registry/sdk/rollout"
)

// RolloutApproveOptions are rollout approve's arguments and flags.
type RolloutApproveOptions struct {
	Wave int

	releaseTarget
}

func newRolloutApprove(f *factory) *cobra.Command {
	o := &RolloutApproveOptions{}
	cmd := &cobra.Command{
		Use:   "approve release/NAME [--wave N]",
		Short: "Approve the next wave of a Release whose rollout waits for approval (approval: Manual)",
		Long: `approve lets the next wave of a Release's current revision begin, when its rollout's approval is
Manual: each wave of each revision waits, Progressing AwaitingApproval, until approved. The approval
names the revision (status.revision, the hash of what is applied): a change to the Release after it
makes a new revision, whose waves wait again. --wave N approves every wave up to N at once. Look
before you approve: rollout status and describe release say where the rollout stands.`,
		Example: `  # Let web's next wave begin
  clusterregistry rollout approve release/web -n fleet`,
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		RunE:              runOptions(f, o),
		ValidArgsFunction: rolloutCompletion(f),
	}
	cmd.Flags().IntVar(&o.Wave, "wave", 0, "approve every wave up to this one; 0 is the next")
	return cmd
}

// Validate refuses a negative wave.
func (o *RolloutApproveOptions) Validate() error {
	if o.Wave < 0 {
		return usageError{fmt.Errorf("--wave %d: want 0 (the next) or more", o.Wave)}
	}
	return nil
}

// Run writes the approval.
func (o *RolloutApproveOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	approved, err := rollout.Approve(ctx, reg.Clusters.ClusterregistryV1alpha1(), reg.Namespace, o.name, o.Wave)
	if invalid := (*rollout.InvalidError)(nil); errors.As(err, &invalid) {
		return usageError{fmt.Errorf("--%w", err)}
	}
	if err != nil {
		return releaseError(ctx, reg, o.name, err)
	}
	fmt.Fprintf(o.out, "%s wave %d of revision %s approved\n", releaseRef(o.name), approved.Wave, approved.Revision)
	return nil
}
