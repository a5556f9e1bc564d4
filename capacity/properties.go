package capacity

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// ClusterPropertyResource is SIG Multicluster's About API (KEP-2149): the ClusterProperty
// objects a cluster says itself with, cluster-scoped, each a name and a spec.value.
var ClusterPropertyResource = schema.GroupVersionResource{Group: "about.k8s.io", Version: "v1alpha1", Resource: "clusterproperties"}

// Bounds of what a member's ClusterProperties put in its Cluster's status, as the CRD's schema
// holds it: a member's admin writes them, and one with more, or longer values, must not make the
// registry refuse the member's figures.
const (
	maxProperties    = 64
	maxPropertyValue = 128
)

// Properties are a member's ClusterProperty objects as status.properties holds them, observed
// at now: by name, the well-known ones (v1alpha1.PropertyClusterID, PropertyClusterSet) first,
// at most 64; one whose value is longer than 128 characters is left out (a value cut short
// would say something else), and so is one without a value. skipped counts those left out.
func Properties(objs []*unstructured.Unstructured, now time.Time) (props []v1alpha1.ClusterStatusProperty, skipped int) {
	for _, o := range objs {
		value, _, _ := unstructured.NestedString(o.Object, "spec", "value")
		if value == "" || len(value) > maxPropertyValue {
			skipped++
			continue
		}
		props = append(props, v1alpha1.ClusterStatusProperty{Name: o.GetName(), Value: value, LastObservedTime: metav1.NewTime(now)})
	}
	wellKnown := func(name string) int {
		switch name {
		case v1alpha1.PropertyClusterID:
			return 0
		case v1alpha1.PropertyClusterSet:
			return 1
		}
		return 2
	}
	slices.SortFunc(props, func(a, b v1alpha1.ClusterStatusProperty) int {
		return cmp.Or(cmp.Compare(wellKnown(a.Name), wellKnown(b.Name)), cmp.Compare(a.Name, b.Name))
	})
	if len(props) > maxProperties {
		skipped += len(props) - maxProperties
		props = props[:maxProperties]
	}
	return props, skipped
}

// sameProperties reports whether two lists say the same names and values, their times aside.
func sameProperties(a, b []v1alpha1.ClusterStatusProperty) bool {
	return slices.EqualFunc(a, b, func(x, y v1alpha1.ClusterStatusProperty) bool { return x.Name == y.Name && x.Value == y.Value })
}

// keepProperty keeps of a ClusterProperty what Properties reads: its name and spec.value.
func keepProperty(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	value, _, _ := unstructured.NestedString(u.Object, "spec", "value")
	kept := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{"name": u.GetName(), "resourceVersion": u.GetResourceVersion(), "uid": string(u.GetUID())},
		"spec":     map[string]any{"value": value}}}
	return kept, nil
}
