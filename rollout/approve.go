package rollout

import (
	"context"
	"fmt"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
)

// Approval is what Approve wrote: every wave of Revision up to Wave may begin.
type Approval struct {
	Revision string
	Wave     int
}

// Approve lets the next wave of the Release's current revision begin, or with wave > 0 every
// wave up to wave, when its rollout's approval is Manual. The approval names the revision
// (status.revision): a change to the Release after it makes a new revision, whose waves wait
// again.
func Approve(ctx context.Context, releases Releases, namespace, name string, wave int) (Approval, error) {
	if wave < 0 {
		return Approval{}, &InvalidError{Message: fmt.Sprintf("wave %d: want 0 (the next) or more", wave)}
	}
	var out Approval
	err := update(ctx, releases, namespace, name, func(rel *v1alpha1.Release) (bool, error) {
		if rel.Spec.Rollout == nil || rel.Spec.Rollout.Approval != v1alpha1.ApprovalManual {
			return false, &RefusedError{Message: fmt.Sprintf("%s: its rollout's approval is Automatic: nothing waits for approval", Ref(name))}
		}
		if rel.Status.ObservedGeneration != rel.Generation || rel.Status.Revision == "" {
			return false, &RefusedError{Message: fmt.Sprintf("%s: the releases controller has not rendered generation %d yet: approve once status.revision is its", Ref(name), rel.Generation)}
		}
		out.Revision = rel.Status.Revision
		out.Wave = max(wave, delivery.Approved(rel, out.Revision)+1)
		if waves := int(rel.Status.Waves); waves > 0 && out.Wave > waves {
			if wave == 0 {
				return false, &RefusedError{Message: fmt.Sprintf("%s: every wave (%d) of revision %s is approved", Ref(name), waves, out.Revision)}
			}
			return false, &InvalidError{Message: fmt.Sprintf("wave %d: revision %s has %d waves", wave, out.Revision, waves)}
		}
		if rel.Annotations == nil {
			rel.Annotations = map[string]string{}
		}
		rel.Annotations[v1alpha1.ApprovedAnnotation] = fmt.Sprintf("%s/%d", out.Revision, out.Wave)
		return true, nil
	})
	return out, err
}
