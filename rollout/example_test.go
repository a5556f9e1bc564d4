package rollout_test

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clientset/versioned/fake"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/rollout"
)

// A tool approves the next wave of a Release whose rollout waits for approval, and tells a
// refusal (the Release's state) from its own mistake (a wave the revision does not have).
func ExampleApprove() {
	ctx := context.Background()
	registry := fake.NewClientset(&v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "web", Generation: 1},
		Spec:       v1alpha1.ReleaseSpec{Rollout: &v1alpha1.ReleaseRollout{Approval: v1alpha1.ApprovalManual}},
		Status:     v1alpha1.ReleaseStatus{ObservedGeneration: 1, Revision: "5d8f", Wave: 1, Waves: 3},
	})
	releases := registry.ClusterregistryV1alpha1()

	approved, err := rollout.Approve(ctx, releases, "fleet", "web", 0)
	fmt.Println(approved.Wave, approved.Revision, err)

	_, err = rollout.Approve(ctx, releases, "fleet", "web", 7)
	var invalid *rollout.InvalidError
	fmt.Println(errors.As(err, &invalid), err)

	err = rollout.Resume(ctx, releases, "fleet", "web")
	var refused *rollout.RefusedError
	fmt.Println(errors.As(err, &refused), err)
	// Output:
	// 1 5d8f <nil>
	// true wave 7: revision 5d8f has 3 waves
	// true release.clusterregistry.k8s.io/web is not paused
}
