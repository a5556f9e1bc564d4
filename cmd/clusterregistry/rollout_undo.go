package main

import (
	"context"
	"fmt"

	"github.com/cluster-registry/sdk/rollout"
	"github.com/spf13/cobra"
)

// RolloutUndoOptions are rollout undo's arguments and flags.
type RolloutUndoOptions struct {
	ToRevision int64

	releaseTarget
}

func newRolloutUndo(f *factory) *cobra.Command {
	o := &RolloutUndoOptions{}
	cmd := &cobra.Command{
		Use:   "undo release/NAME [--to-revision N]",
		Short: "Put a Release's earlier revision back: the previous one, or --to-revision N",
		Long: `undo puts back what an earlier revision of a Release was made from (its source, target namespace,
createNamespace and drift policy; a chart a repository's version range resolved is pinned to the
version and digest that ran), as kubectl rollout undo puts a Deployment's template back. The
releases controller rolls it out as any change, in waves, and records it as the newest revision.
Without --to-revision, the revision before the current one. A source that names a ConfigMap or a
Secret names it again as it is now: undo does not bring back their contents. A revision whose
record no longer renders to its revision (the record was changed after the releases controller
wrote it, or such a ConfigMap or Secret changed) is refused.`,
		Example: `  # Back to the previous revision
  clusterregistry rollout undo release/web -n fleet

  # Back to revision 3 of rollout history
  clusterregistry rollout undo release/web -n fleet --to-revision 3`,
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		RunE:              runOptions(f, o),
		ValidArgsFunction: rolloutCompletion(f),
	}
	cmd.Flags().Int64Var(&o.ToRevision, "to-revision", 0, "the revision to put back; 0 is the one before the current")
	return cmd
}

// Validate refuses a negative revision.
func (o *RolloutUndoOptions) Validate() error {
	if o.ToRevision < 0 {
		return usageError{fmt.Errorf("--to-revision %d: want 0 (the previous) or more", o.ToRevision)}
	}
	return nil
}

// Run puts the revision back.
func (o *RolloutUndoOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	undone, err := rollout.Undo(ctx, reg.Clusters.ClusterregistryV1alpha1(), reg.Kube, reg.Namespace, o.name, o.ToRevision)
	if err != nil {
		return releaseError(ctx, reg, o.name, err)
	}
	if undone.Skipped {
		fmt.Fprintf(o.out, "%s skipped rollback (its spec already is revision %d's)\n", releaseRef(o.name), undone.To.Number)
		return nil
	}
	fmt.Fprintf(o.out, "%s rolled back to revision %d (%s)\n", releaseRef(o.name), undone.To.Number, undone.To.Hash)
	return nil
}
