package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Bundle is what a Release delivers: its objects, in the order they are applied, and the
// revision that names them.
type Bundle struct {
	// Objects are the rendered objects, labelled, sorted in apply order (ApplyOrder). A chart's
	// are rendered for each member as it is applied to: Objects are those of a render with the
	// Release's values alone.
	Objects []*unstructured.Unstructured
	// Revision is a hash of the objects as rendered (before labelling): the same objects give
	// the same revision. A chart's is a hash of the chart (its digest), its values and how
	// members' values are taken.
	Revision string

	rel   *v1alpha1.Release
	chart *chartSource
	// overrides are the Release's spec.overrides, compiled (overrides.go).
	overrides []override
	// divisions are its spec.divide, compiled, and shares each member's, by Cluster name, once
	// DividedAmong has divided them (divide.go).
	divisions []division
	shares    map[string][]share
	// plans are the Capacity divisions' shares as divided, for status.divisions; divided says
	// DividedAmong made shares and plans (a Bundle it did not divide keeps the status's).
	plans   []v1alpha1.ReleaseDivisionStatus
	divided bool
}

// chartStatus is the chart the Bundle delivers, for the Release's status; nil when its source
// is not a chart.
func (b *Bundle) chartStatus() *v1alpha1.ReleaseChartStatus {
	if b.chart == nil {
		return nil
	}
	c := b.chart.chart
	return &v1alpha1.ReleaseChartStatus{Name: c.Name(), Version: c.Version(), Digest: c.Digest}
}

// objectsFor are the objects to apply to the member of cluster: Objects, or the chart rendered
// with the member's values, labelled and ordered as Objects are.
func (b *Bundle) objectsFor(cluster *v1alpha1.Cluster) ([]*unstructured.Unstructured, error) {
	objs := b.Objects
	if b.chart != nil {
		var err error
		if objs, err = b.chart.objects(cluster); err != nil {
			return nil, err
		}
		finish(b.rel, objs, b.Revision)
	}
	ch := b.overridesFor(cluster)
	if len(ch) == 0 {
		return objs, nil
	}
	patched, err := applyOverrides(objs, ch)
	if err != nil {
		return nil, err
	}
	finish(b.rel, patched, memberRevision(b.Revision, ch))
	return patched, nil
}

// SourceError is a Release's source that cannot be rendered: Where names the manifest (its index,
// or the ConfigMap's key and document), Err says why.
type SourceError struct {
	Where string
	Err   error
}

func (e *SourceError) Error() string { return fmt.Sprintf("%s: %v", e.Where, e.Err) }
func (e *SourceError) Unwrap() error { return e.Err }

// Inputs are what a Release's source points at, read or fetched by the caller.
type Inputs struct {
	// ConfigMap is the ConfigMap spec.source.configMap or spec.source.chart.configMap names, read
	// from the Release's namespace; nil when there is none.
	ConfigMap *corev1.ConfigMap
	// Chart is the chart spec.source.chart.repository names, fetched (chartrepo.Fetcher).
	Chart *chartrepo.Chart
	// ValuesFrom are what spec.source.chart.valuesFrom names, in its order: each the data at its
	// key, nil for an optional one that is missing.
	ValuesFrom [][]byte
}

// Render renders rel's objects: its inline manifests, the YAML streams of in.ConfigMap, or a
// chart (the packaged chart in in.ConfigMap, or in.Chart from a repository), rendered with Helm's
// engine (package chartrender) for each member as it is applied to, and here with the Release's
// values alone, to check it. Namespaced objects without a namespace get rel.Spec.TargetNamespace
// ("default" when empty) once namespaced is known, in Place; here every object is only checked
// and labelled. Overrides (spec.overrides) are checked against those objects, and applied for
// each member as it is applied to, as are the shares of spec.divide (DividedAmong). Errors are
// *SourceError, *OverrideError or *DivisionError.
func Render(rel *v1alpha1.Release, in Inputs) (*Bundle, error) {
	b, err := renderSource(rel, in)
	if err != nil {
		return nil, err
	}
	if err := b.withOverrides(rel); err != nil {
		return nil, err
	}
	if err := b.withDivisions(rel); err != nil {
		return nil, err
	}
	return b, nil
}

// renderSource is Render without the overrides.
func renderSource(rel *v1alpha1.Release, in Inputs) (*Bundle, error) {
	var objs []*unstructured.Unstructured
	sum := sha256.New()
	src := rel.Spec.Source
	switch {
	case len(src.Manifests) > 0:
		var err error
		if objs, err = manifestObjects(src.Manifests, sum); err != nil {
			return nil, err
		}
	case src.ConfigMap != nil:
		var err error
		if objs, err = configMapObjects(rel, in.ConfigMap, sum); err != nil {
			return nil, err
		}
	case src.Chart != nil:
		cs, err := renderChart(rel, in, sum)
		if err != nil {
			return nil, err
		}
		writeShape(sum, rel)
		b := &Bundle{Revision: hex.EncodeToString(sum.Sum(nil))[:16], rel: rel, chart: cs}
		if cs.helm {
			return b, nil // no objects of the controller's: Helm's, on each member
		}
		if b.Objects, err = b.objectsFor(nil); err != nil {
			return nil, err
		}
		return b, nil
	default:
		return nil, &SourceError{Where: "spec.source", Err: errors.New("set manifests, configMap or chart")}
	}
	writeShape(sum, rel)
	seen := map[string]int{}
	for i, u := range objs {
		key := objectKey(u)
		if j, dup := seen[key]; dup {
			return nil, &SourceError{Where: "spec.source", Err: fmt.Errorf("objects %d and %d are both %s", j+1, i+1, key)}
		}
		seen[key] = i
	}
	revision := hex.EncodeToString(sum.Sum(nil))[:16]
	finish(rel, objs, revision)
	return &Bundle{Objects: objs, Revision: revision, rel: rel}, nil
}

// manifestObjects decodes the inline manifests, checked, into sum as they are written.
func manifestObjects(manifests []runtime.RawExtension, sum hash.Hash) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for i, raw := range manifests {
		where := fmt.Sprintf("spec.source.manifests[%d]", i)
		// Decoded as a plain map: unstructured's own decoder quotes the whole object in its
		// errors, and a manifest may hold a Secret's data.
		var obj map[string]any
		if err := json.Unmarshal(raw.Raw, &obj); err != nil || obj == nil {
			return nil, &SourceError{Where: where, Err: errors.New("not a JSON object")}
		}
		u := &unstructured.Unstructured{Object: obj}
		if err := check(u); err != nil {
			return nil, &SourceError{Where: where, Err: err}
		}
		objs = append(objs, u)
		sum.Write(raw.Raw)
		sum.Write([]byte{0})
	}
	return objs, nil
}

// configMapObjects decodes the source ConfigMap's key (or every key, in order), checked, into
// sum with each key's name.
func configMapObjects(rel *v1alpha1.Release, configMap *corev1.ConfigMap, sum hash.Hash) ([]*unstructured.Unstructured, error) {
	src := rel.Spec.Source
	var objs []*unstructured.Unstructured
	if configMap == nil {
		return nil, &SourceError{Where: "spec.source.configMap", Err: fmt.Errorf("ConfigMap %s not found in namespace %s", src.ConfigMap.Name, rel.Namespace)}
	}
	keys := []string{src.ConfigMap.Key}
	if src.ConfigMap.Key == "" {
		keys = make([]string, 0, len(configMap.Data))
		for k := range configMap.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
	}
	for _, key := range keys {
		data, ok := configMap.Data[key]
		if !ok {
			return nil, &SourceError{Where: fmt.Sprintf("ConfigMap %s", configMap.Name), Err: fmt.Errorf("no key %q", key)}
		}
		docs, err := decodeStream(data)
		if err != nil {
			return nil, &SourceError{Where: fmt.Sprintf("ConfigMap %s key %s", configMap.Name, key), Err: err}
		}
		for i, u := range docs {
			if err := check(u); err != nil {
				return nil, &SourceError{Where: fmt.Sprintf("ConfigMap %s key %s document %d", configMap.Name, key, i+1), Err: err}
			}
			objs = append(objs, u)
		}
		sum.Write([]byte(key))
		sum.Write([]byte{0})
		sum.Write([]byte(data))
		sum.Write([]byte{0})
	}
	if len(objs) == 0 {
		return nil, &SourceError{Where: fmt.Sprintf("ConfigMap %s", configMap.Name), Err: errors.New("holds no objects")}
	}
	return objs, nil
}

// finish labels objs as the Release's at revision, leaves out the fields the Release ignores,
// and sorts them in apply order.
func finish(rel *v1alpha1.Release, objs []*unstructured.Unstructured, revision string) {
	for _, u := range objs {
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1alpha1.ReleaseLabel] = rel.Name
		labels[v1alpha1.ReleaseNamespaceLabel] = rel.Namespace
		labels[v1alpha1.RevisionLabel] = revision
		u.SetLabels(labels)
		if rel.Spec.Drift != nil {
			gvk := u.GroupVersionKind()
			for _, ig := range rel.Spec.Drift.Ignore {
				if ig.Group == gvk.Group && ig.Kind == gvk.Kind {
					for _, p := range ig.Paths {
						removePointer(u.Object, p)
					}
				}
			}
		}
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return ApplyOrder(a.GroupVersionKind().GroupKind()) - ApplyOrder(b.GroupVersionKind().GroupKind())
	})
}

// decodeStream splits a YAML (or JSON) stream into objects, skipping empty documents.
func decodeStream(data string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for n := 1; ; n++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

// check refuses an object a member could not take or that a Release must not carry.
func check(u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	switch {
	case gvk.Kind == "" || gvk.Version == "":
		return errors.New("apiVersion and kind are required")
	case strings.HasSuffix(gvk.Kind, "List"):
		return fmt.Errorf("a %s: give its items one by one", gvk.Kind)
	case u.GetName() == "":
		return fmt.Errorf("%s: metadata.name is required (generateName cannot be kept on a member)", gvk.Kind)
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(u.GetName())) {
		return fmt.Errorf("%s %q: metadata.name: %s", gvk.Kind, u.GetName(), msg)
	}
	if u.GetNamespace() != "" {
		for _, msg := range validation.IsDNS1123Label(u.GetNamespace()) {
			return fmt.Errorf("%s %q: metadata.namespace: %s", gvk.Kind, u.GetName(), msg)
		}
	}
	for _, l := range []string{v1alpha1.ReleaseLabel, v1alpha1.ReleaseNamespaceLabel, v1alpha1.RevisionLabel} {
		if _, ok := u.GetLabels()[l]; ok {
			return fmt.Errorf("%s %q: the label %s is the Release's own", gvk.Kind, u.GetName(), l)
		}
	}
	// Fields the member sets: sent back, they would be refused or fight the member.
	unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(u.Object, "metadata", "uid")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(u.Object, "metadata", "generation")
	unstructured.RemoveNestedField(u.Object, "status")
	return nil
}

// objectKey names an object within a Bundle: group, kind, namespace and name (the namespace as
// written; defaulted ones are compared on the member).
func objectKey(u *unstructured.Unstructured) string {
	gk := u.GroupVersionKind().GroupKind()
	return fmt.Sprintf("%s %s/%s", gk, u.GetNamespace(), u.GetName())
}

// removePointer removes the field at an RFC 6901 pointer; a pointer through a list or to a field
// that is not there removes nothing.
func removePointer(obj map[string]any, pointer string) {
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i := range parts {
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(parts[i])
	}
	unstructured.RemoveNestedField(obj, parts...)
}

// ApplyOrder is where objects of a kind go in apply order (lowest first); removal goes the other
// way. Namespaces and definitions come before what lives in them, workloads after what they use,
// as Helm's install order does.
func ApplyOrder(gk schema.GroupKind) int {
	if i := slices.Index(applyOrder, gk.Kind); i >= 0 {
		return i
	}
	return len(applyOrder) // every other kind, custom resources included, after
}

var applyOrder = []string{
	"Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy", "PodDisruptionBudget",
	"ServiceAccount", "Secret", "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
	"StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
	"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
}

// writeShape adds to a revision's sum what else shapes the objects on members: the target
// namespace, whether it is made, and the fields drift leaves alone. createNamespace counts only
// when set, so that Releases without it keep the revisions they had.
func writeShape(sum io.Writer, rel *v1alpha1.Release) {
	fmt.Fprintf(sum, "ns=%s;", rel.Spec.TargetNamespace)
	if rel.Spec.CreateNamespace {
		fmt.Fprint(sum, "createNamespace;")
	}
	if rel.Spec.Drift != nil {
		for _, ig := range rel.Spec.Drift.Ignore {
			fmt.Fprintf(sum, "ignore=%s/%s:%s;", ig.Group, ig.Kind, strings.Join(ig.Paths, ","))
		}
	}
}
