package delivery

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// secretValuesRecheck is how often a Release whose values come from a Secret reads it again:
// Secrets are read when needed, not watched (a controller of many sets does not keep them all).
const secretValuesRecheck = time.Minute

// valuesFrom reads what rel's spec.source.chart.valuesFrom names, in order (Inputs.ValuesFrom):
// ConfigMaps from the Controller's cache, Secrets from the registry. Errors name the entry and
// the object, never what a Secret holds.
func (sr *sources) valuesFrom(ctx context.Context, rel *v1alpha1.Release) ([][]byte, error) {
	refs := rel.Spec.Source.Chart.ValuesFrom
	out := make([][]byte, len(refs))
	for i, ref := range refs {
		where := fmt.Sprintf("spec.source.chart.valuesFrom[%d]", i)
		key := valuesKey(ref)
		var data []byte
		found, hasKey := false, false
		switch ref.Kind {
		case "ConfigMap":
			if cm, err := sr.configMap(ctx, rel.Namespace, ref.Name); err == nil {
				found = true
				if d, ok := cm.Data[key]; ok {
					data, hasKey = []byte(d), true
				} else {
					data, hasKey = cm.BinaryData[key]
				}
			}
		case "Secret":
			s, err := sr.kube.CoreV1().Secrets(rel.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			switch {
			case err == nil:
				found = true
				data, hasKey = s.Data[key]
			case !apierrors.IsNotFound(err):
				return nil, fmt.Errorf("%s: reading Secret %s/%s: %w", where, rel.Namespace, ref.Name, err)
			}
		default:
			return nil, fmt.Errorf("%s: kind %q: want ConfigMap or Secret", where, ref.Kind)
		}
		switch {
		case found && hasKey:
			if data == nil {
				data = []byte{}
			}
			out[i] = data
		case ref.Optional:
			out[i] = nil
		case !found:
			return nil, fmt.Errorf("%s: %s %s not found in namespace %s (or mark it optional)", where, ref.Kind, ref.Name, rel.Namespace)
		default:
			return nil, fmt.Errorf("%s: %s %s has no key %s", where, ref.Kind, ref.Name, key)
		}
	}
	return out, nil
}

// chartInSecret reads the packaged chart rel's spec.source.chart.secret names, as Inputs.Chart.
func (sr *sources) chartInSecret(ctx context.Context, rel *v1alpha1.Release) (*chartrepo.Chart, error) {
	ref := rel.Spec.Source.Chart.Secret
	s, err := sr.kube.CoreV1().Secrets(rel.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("spec.source.chart.secret: Secret %s not found in namespace %s", ref.Name, rel.Namespace)
	case err != nil:
		return nil, fmt.Errorf("spec.source.chart.secret: reading Secret %s/%s: %w", rel.Namespace, ref.Name, err)
	}
	data, ok := s.Data[chartKey(ref)]
	if !ok {
		return nil, fmt.Errorf("spec.source.chart.secret: Secret %s has no key %s: put the packaged chart there (kubectl create secret generic %s --from-file=%s=CHART.tgz)", ref.Name, chartKey(ref), ref.Name, chartKey(ref))
	}
	return &chartrepo.Chart{Archive: data}, nil
}
