package capacity_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// clusterPropertyCRD is the About API's ClusterProperty, as KEP-2149 defines it: cluster-scoped,
// a spec.value.
var clusterPropertyCRD = &apiextensionsv1.CustomResourceDefinition{
	ObjectMeta: metav1.ObjectMeta{Name: "clusterproperties.about.k8s.io", Annotations: map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/3084"}},
	Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "about.k8s.io", Scope: apiextensionsv1.ClusterScoped,
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusterproperties", Singular: "clusterproperty", Kind: "ClusterProperty", ListKind: "ClusterPropertyList"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"value": {Type: "string", MaxLength: new(int64(128 * 1024))}}}}}}}},
	},
}

// A member that does not serve the About API has its figures written and no properties; once it
// serves it, its ClusterProperties reach status.properties (well-known first; a value too long
// for the registry's schema left out, not cut short), and a changed value is written though no
// figure moved.
func TestPropertiesInStatus(t *testing.T) {
	fleetmain.Integration(t)
	ns := fleettest.CopySet(t, lf)
	member := lf.Members[0]
	ctx := fleettest.Context(t, 3*time.Minute)
	c, err := capacity.New(capacity.Options{Registry: versioned.NewForConfigOrDie(lf.Registry.Config), Members: startFleet(t, ns),
		Interval: 100 * time.Millisecond, Heartbeat: time.Hour})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	status := func(want func(*v1alpha1.ClusterStatus) bool, what string) *v1alpha1.ClusterStatus {
		t.Helper()
		var got *v1alpha1.ClusterStatus
		require.Eventually(t, func() bool {
			cl, err := clusters.Get(ctx, member.Name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			got = &cl.Status
			return want(got)
		}, time.Minute, 50*time.Millisecond, "%s: status is %+v", what, got)
		return got
	}
	first := status(func(s *v1alpha1.ClusterStatus) bool { return s.Resources != nil }, "figures of a member without the About API")
	require.Empty(t, first.Properties)

	crds := apiextensions.NewForConfigOrDie(member.Config).ApiextensionsV1().CustomResourceDefinitions()
	_, err = crds.Create(ctx, clusterPropertyCRD, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = crds.Delete(context.Background(), clusterPropertyCRD.Name, metav1.DeleteOptions{}) })
	props := dynamic.NewForConfigOrDie(member.Config).Resource(capacity.ClusterPropertyResource)
	create := func(name, value string) {
		t.Helper()
		require.Eventually(t, func() bool { // until the CRD is served
			_, err := props.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "about.k8s.io/v1alpha1", "kind": "ClusterProperty",
				"metadata": map[string]any{"name": name}, "spec": map[string]any{"value": value}}}, metav1.CreateOptions{})
			return err == nil
		}, 30*time.Second, 50*time.Millisecond, "creating ClusterProperty %s", name)
	}
	create("site.example.com", "edge-7")
	create(v1alpha1.PropertyClusterSet, "fleet")
	create(v1alpha1.PropertyClusterID, "member-1.fleet")
	create("long.example.com", strings.Repeat("x", 200))
	got := status(func(s *v1alpha1.ClusterStatus) bool { return len(s.Properties) == 3 }, "the member's properties")
	require.Equal(t, []string{v1alpha1.PropertyClusterID + "=member-1.fleet", v1alpha1.PropertyClusterSet + "=fleet", "site.example.com=edge-7"}, propertyPairs(got.Properties))

	site, err := props.Get(ctx, "site.example.com", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(site.Object, "edge-8", "spec", "value"))
	_, err = props.Update(ctx, site, metav1.UpdateOptions{})
	require.NoError(t, err)
	status(func(s *v1alpha1.ClusterStatus) bool {
		return len(s.Properties) == 3 && s.Properties[2].Value == "edge-8"
	}, "a changed value, no figure moved")
	writes := c.Writes()
	require.Never(t, func() bool { return c.Writes() != writes }, time.Second, 50*time.Millisecond, "written again with nothing changed")
}

func propertyPairs(props []v1alpha1.ClusterStatusProperty) []string {
	var out []string
	for _, p := range props {
		out = append(out, p.Name+"="+p.Value)
	}
	return out
}
