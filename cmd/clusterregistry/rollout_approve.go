package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
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
	var approved int
	var revision string
	err = updateRelease(ctx, reg, o.name, func(rel *v1alpha1.Release) (bool, error) {
		if rel.Spec.Rollout == nil || rel.Spec.Rollout.Approval != v1alpha1.ApprovalManual {
			return false, fmt.Errorf("%s: its rollout's approval is Automatic: nothing waits for approval", releaseRef(o.name))
		}
		if rel.Status.ObservedGeneration != rel.Generation || rel.Status.Revision == "" {
			return false, fmt.Errorf("%s: the releases controller has not rendered generation %d yet: approve once status.revision is its", releaseRef(o.name), rel.Generation)
		}
		revision = rel.Status.Revision
		approved = max(o.Wave, delivery.Approved(rel, revision)+1)
		if waves := int(rel.Status.Waves); waves > 0 && approved > waves {
			if o.Wave == 0 {
				return false, fmt.Errorf("%s: every wave (%d) of revision %s is approved", releaseRef(o.name), waves, revision)
			}
			return false, usageError{fmt.Errorf("--wave %d: revision %s has %d waves", o.Wave, revision, waves)}
		}
		if rel.Annotations == nil {
			rel.Annotations = map[string]string{}
		}
		rel.Annotations[v1alpha1.ApprovedAnnotation] = fmt.Sprintf("%s/%d", revision, approved)
		return true, nil
	})
	var usage usageError
	if errors.As(err, &usage) {
		return usage
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.out, "%s wave %d of revision %s approved\n", releaseRef(o.name), approved, revision)
	return nil
}
