package delivery

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/chartrender"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// charts renders every Controller's charts in the process: renders are kept by their input, so
// Releases and members that give a chart the same input share one.
var charts = chartrender.NewRenderer(chartrender.Options{})

// defaultChartKey is the binaryData key of a packaged chart when the Release names none.
const defaultChartKey = "chart.tgz"

// chartSource is a Release's chart, rendered for each member (Bundle.objectsFor).
type chartSource struct {
	rel    *v1alpha1.Release
	chart  *chartrender.Chart
	values map[string]any
	// helm is Helm mode: archive goes to Helm's own install on each member (package
	// helmrelease), and nothing is rendered here.
	helm    bool
	archive []byte
}

// renderChart checks a Release's chart source: the packaged chart (in the ConfigMap, or fetched
// from the repository), its values, and a render with the Release's values alone (a chart with
// hooks, or that does not render, stops here for every member, named in status). It writes what
// makes the revision to sum.
func renderChart(rel *v1alpha1.Release, in Inputs, sum hash.Hash) (*chartSource, error) {
	src := rel.Spec.Source.Chart
	chart, archive, err := loadChart(rel, in)
	if err != nil {
		return nil, err
	}
	values, err := chartValues(src, in, sum)
	if err != nil {
		return nil, err
	}
	cs := &chartSource{rel: rel, chart: chart, values: values, helm: src.Mode == v1alpha1.ChartModeHelm, archive: archive}
	fmt.Fprintf(sum, "chart=%s;", chart.Digest)
	if cs.helm {
		sum.Write([]byte("mode=Helm;"))
	}
	if src.Values != nil {
		sum.Write(src.Values.Raw)
	}
	for _, mv := range src.MemberValues {
		fmt.Fprintf(sum, ";member=%s:%s:%s", mv.Path, mv.From, mv.Key)
	}
	sum.Write([]byte{0})
	if cs.helm {
		return cs, nil // Helm runs the chart, hooks and all, on each member
	}
	if _, err := cs.objects(nil); err != nil {
		return nil, err
	}
	return cs, nil
}

// loadChart is the Release's chart, loaded from what the controller read of its source, and the
// archive it came in.
func loadChart(rel *v1alpha1.Release, in Inputs) (*chartrender.Chart, []byte, error) {
	src := rel.Spec.Source.Chart
	switch {
	case src.Repository != nil:
		if in.Chart == nil {
			return nil, nil, &SourceError{Where: "spec.source.chart.repository", Err: fmt.Errorf("the chart at %s was not fetched", src.Repository.URL)}
		}
		c, err := chartrender.Load(in.Chart.Archive)
		if err != nil {
			return nil, nil, &SourceError{Where: fmt.Sprintf("chart at %s version %s", src.Repository.URL, in.Chart.Version), Err: err}
		}
		return c, in.Chart.Archive, nil
	case src.Secret != nil:
		// The controller read the Secret's key into in.Chart (chartInSecret).
		if in.Chart == nil {
			return nil, nil, &SourceError{Where: "spec.source.chart.secret", Err: fmt.Errorf("the chart in Secret %s was not read", src.Secret.Name)}
		}
		c, err := chartrender.Load(in.Chart.Archive)
		if err != nil {
			return nil, nil, &SourceError{Where: fmt.Sprintf("Secret %s key %s", src.Secret.Name, chartKey(src.Secret)), Err: err}
		}
		return c, in.Chart.Archive, nil
	case src.ConfigMap != nil:
		configMap := in.ConfigMap
		key := src.ConfigMap.Key
		if key == "" {
			key = defaultChartKey
		}
		if configMap == nil {
			return nil, nil, &SourceError{Where: "spec.source.chart.configMap", Err: fmt.Errorf("ConfigMap %s not found in namespace %s", src.ConfigMap.Name, rel.Namespace)}
		}
		data, ok := configMap.BinaryData[key]
		if !ok {
			return nil, nil, &SourceError{Where: fmt.Sprintf("ConfigMap %s", configMap.Name),
				Err: fmt.Errorf("no binaryData key %q: put the packaged chart there (kubectl create configmap %s --from-file=%s=CHART.tgz)", key, configMap.Name, key)}
		}
		c, err := chartrender.Load(data)
		if err != nil {
			return nil, nil, &SourceError{Where: fmt.Sprintf("ConfigMap %s key %s", configMap.Name, key), Err: err}
		}
		return c, data, nil
	default:
		return nil, nil, &SourceError{Where: "spec.source.chart", Err: errors.New("set configMap, secret or repository")}
	}
}

// chartValues merges the Release's values: valuesFrom in order, then the inline values. What was
// read of valuesFrom goes into sum.
func chartValues(src *v1alpha1.ReleaseChartSource, in Inputs, sum hash.Hash) (map[string]any, error) {
	values := map[string]any{}
	if len(in.ValuesFrom) != len(src.ValuesFrom) {
		return nil, &SourceError{Where: "spec.source.chart.valuesFrom", Err: errors.New("not read")}
	}
	for i, raw := range in.ValuesFrom {
		if raw == nil {
			continue // optional, and missing
		}
		ref := src.ValuesFrom[i]
		var from map[string]any
		// The parser's own message is left out: it quotes what it read, which may be a Secret's.
		if err := yaml.Unmarshal(raw, &from); err != nil {
			return nil, &SourceError{Where: fmt.Sprintf("spec.source.chart.valuesFrom[%d] (%s %s key %s)", i, ref.Kind, ref.Name, valuesKey(ref)), Err: errors.New("not a YAML map of values")}
		}
		mergeValues(values, from)
		fmt.Fprintf(sum, "valuesFrom=%d:", i)
		sum.Write(raw)
		sum.Write([]byte{0})
	}
	if src.Values != nil && len(src.Values.Raw) > 0 {
		var inline map[string]any
		if err := json.Unmarshal(src.Values.Raw, &inline); err != nil || inline == nil {
			return nil, &SourceError{Where: "spec.source.chart.values", Err: errors.New("not an object")}
		}
		mergeValues(values, inline)
	}
	return values, nil
}

// valuesFor are the chart's values for a member's Cluster (nil: the Release's values alone).
func (cs *chartSource) valuesFor(cluster *v1alpha1.Cluster) map[string]any {
	values := deepCopyMap(cs.values)
	for _, mv := range cs.rel.Spec.Source.Chart.MemberValues {
		setPath(values, mv.Path, memberValue(cluster, mv))
	}
	return values
}

// objects renders the chart for a member's Cluster (nil: with the Release's values alone), checked
// as a Release's manifests are; they are labelled and ordered by the caller.
func (cs *chartSource) objects(cluster *v1alpha1.Cluster) ([]*unstructured.Unstructured, error) {
	values := cs.valuesFor(cluster)
	kubeVersion := ""
	if cluster != nil {
		kubeVersion = cluster.Status.Version
	}
	namespace := cs.rel.TargetNamespaceOrDefault()
	where := fmt.Sprintf("chart %s %s", cs.chart.Name(), cs.chart.Version())
	objs, err := charts.Render(chartrender.Input{Chart: cs.chart, Values: values, ReleaseName: cs.rel.Name, Namespace: namespace, KubeVersion: kubeVersion})
	if err != nil {
		return nil, &SourceError{Where: where, Err: err}
	}
	seen := map[string]bool{}
	for _, u := range objs {
		if err := check(u); err != nil {
			return nil, &SourceError{Where: where, Err: err}
		}
		key := objectKey(u)
		if seen[key] {
			return nil, &SourceError{Where: where, Err: fmt.Errorf("renders %s twice", key)}
		}
		seen[key] = true
	}
	return objs, nil
}

// memberValue is what a member value takes from cluster ("" for the Release's own render).
func memberValue(cluster *v1alpha1.Cluster, mv v1alpha1.ReleaseMemberValue) string {
	if cluster == nil {
		return ""
	}
	switch mv.From {
	case v1alpha1.MemberValueName:
		return cluster.Name
	case v1alpha1.MemberValueLabel:
		return cluster.Labels[mv.Key]
	case v1alpha1.MemberValueAnnotation:
		return cluster.Annotations[mv.Key]
	case v1alpha1.MemberValueVersion:
		return cluster.Status.Version
	}
	return ""
}

// setPath sets a dotted path in values, making the maps on the way (and replacing what is not
// a map there).
func setPath(values map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	m := values
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return deepCopyMap(v)
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = deepCopyValue(v[i])
		}
		return out
	}
	return v
}

// valuesKey is the key a values reference reads.
func valuesKey(ref v1alpha1.ReleaseValuesReference) string {
	if ref.Key == "" {
		return "values.yaml"
	}
	return ref.Key
}

// mergeValues merges over into values: maps merge key by key, anything else is replaced, as
// Helm merges values files given one after the other.
func mergeValues(values, over map[string]any) {
	for k, v := range over {
		if vm, ok := v.(map[string]any); ok {
			if cur, ok := values[k].(map[string]any); ok {
				mergeValues(cur, vm)
				continue
			}
			values[k] = deepCopyMap(vm)
			continue
		}
		values[k] = deepCopyValue(v)
	}
}

// chartKey is the key of a packaged chart in a ConfigMap or Secret.
func chartKey(ref *v1alpha1.ReleaseChartConfigMap) string {
	if ref.Key == "" {
		return defaultChartKey
	}
	return ref.Key
}
