package health

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	crv1alpha1ac "github.com/cluster-registry/sdk/applyconfiguration/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// HostileAPIServer is hostileAPIServer, for the package's integration tests.
var HostileAPIServer = hostileAPIServer

// ApplyStatus writes a Ready status to the Cluster name of namespace as the controller's writer
// does, for BenchmarkHealth's CPU per write.
func ApplyStatus(ctx context.Context, opts Options, namespace, name string, now metav1.Time) error {
	w := &writer{opts: &opts}
	status := crv1alpha1ac.ClusterStatus().WithLastProbeTime(now).WithConditions(metav1ac.Condition().
		WithType(v1alpha1.ConditionReady).WithStatus(metav1.ConditionTrue).WithReason(v1alpha1.ReasonReachable).
		WithMessage("readyz answered").WithLastTransitionTime(now))
	return w.applyStatus(ctx, crv1alpha1ac.Cluster(name, namespace).WithStatus(status))
}
