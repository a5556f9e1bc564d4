package delivery

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// sources reads what Releases' sources name besides themselves: the releases controller from its
// caches, ReadInputs from the registry.
type sources struct {
	kube      kubernetes.Interface
	charts    *chartrepo.Fetcher
	configMap func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// ReadInputs reads what a Release's source names besides itself (its ConfigMap, its chart from a
// repository or a Secret, its values from ConfigMaps and Secrets) from the registry, as the
// releases controller does, for Render: what a tool needs to render a Release outside the
// controller (clusterregistry diff release does). charts nil is a Fetcher with chartrepo's
// defaults.
func ReadInputs(ctx context.Context, kube kubernetes.Interface, charts *chartrepo.Fetcher, rel *v1alpha1.Release) (Inputs, error) {
	if charts == nil {
		charts = defaultCharts()
	}
	sr := &sources{kube: kube, charts: charts, configMap: func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
		return kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	}}
	in, _, stall := sr.inputs(ctx, rel)
	if stall != nil {
		return in, fmt.Errorf("%s: %s", stall.stalledReason, stall.stalledMessage)
	}
	return in, nil
}

// inputs reads what a Release's source names besides itself: its ConfigMap, its chart (from a
// repository or a Secret) and the values it takes from ConfigMaps and Secrets. recheck is how
// often the Release must come back to see them again (a chart's version range, a Secret's
// values), stall why they cannot be read.
func (sr *sources) inputs(ctx context.Context, rel *v1alpha1.Release) (in Inputs, recheck time.Duration, stall *progress) {
	stalled := func(reason string, err error) *progress {
		return &progress{stalledReason: reason, stalledMessage: err.Error()}
	}
	if name := sourceConfigMap(rel); name != "" {
		if cm, err := sr.configMap(ctx, rel.Namespace, name); err == nil {
			in.ConfigMap = cm
		}
	}
	src := rel.Spec.Source.Chart
	if src == nil {
		return in, 0, nil
	}
	var err error
	// A chart in a repository is fetched (or found among those kept) on every turn: a range is
	// resolved again as the Fetcher's ResolveEvery says, and the Release comes back to check.
	if src.Repository != nil {
		recheck = chartRecheck
		if in.Chart, err = sr.fetchChart(ctx, rel); err != nil {
			return in, recheck, stalled("ChartUnavailable", err)
		}
	}
	if src.Secret != nil {
		recheck = pick(recheck, secretValuesRecheck)
		if in.Chart, err = sr.chartInSecret(ctx, rel); err != nil {
			return in, recheck, stalled("InvalidSource", err)
		}
	}
	if len(src.ValuesFrom) > 0 {
		if slices.ContainsFunc(src.ValuesFrom, func(v v1alpha1.ReleaseValuesReference) bool { return v.Kind == "Secret" }) {
			recheck = pick(recheck, secretValuesRecheck)
		}
		if in.ValuesFrom, err = sr.valuesFrom(ctx, rel); err != nil {
			return in, recheck, stalled("InvalidSource", err)
		}
	}
	return in, recheck, nil
}
