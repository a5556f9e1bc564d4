package fleetcache

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Typed checks the type it is given against client-go's scheme before any member is asked, so
// that a wrong type is refused at once rather than failing each member's watch.
func TestTypedExample(t *testing.T) {
	// A kind whose resource is its own name, not a guessed plural.
	//lint:ignore SA1019 Endpoints is still served, and its name is the case checked
	obj, err := typedExample[*corev1.Endpoints](corev1.SchemeGroupVersion.WithResource("endpoints"))
	require.NoError(t, err)
	require.IsType(t, &corev1.Endpoints{}, obj) //lint:ignore SA1019 as above
	_, err = typedExample[*networkingv1.Ingress](networkingv1.SchemeGroupVersion.WithResource("ingresses"))
	require.NoError(t, err)

	_, err = typedExample[*networkingv1.Ingress](schema.GroupVersionResource{Group: "extensions", Version: "v1beta1", Resource: "ingresses"})
	require.ErrorContains(t, err, "ingresses (extensions/v1beta1) does not hold *v1.Ingress (kind Ingress)")
	_, err = typedExample[*corev1.Pod](corev1.SchemeGroupVersion.WithResource("nodes"))
	require.ErrorContains(t, err, "nodes (v1) does not hold *v1.Pod")
	_, err = typedExample[*schemaless](corev1.SchemeGroupVersion.WithResource("nodes"))
	require.ErrorContains(t, err, "is not one of client-go's types")
}

// schemaless is a runtime.Object client-go's scheme does not know.
type schemaless struct{ corev1.Pod }
