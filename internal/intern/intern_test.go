package intern

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// sameString says whether two strings share their bytes.
func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// decoded is a string as a decoder makes it: its own copy.
func decoded(s string) string { return strings.Clone(s) }

// Two objects decoded apart share the strings of their metadata that repeat, keep their values,
// and keep their own names, UIDs, resourceVersions and long values.
func TestMetaSharesRepeatedStrings(t *testing.T) {
	long := strings.Repeat("x", maxLen+1)
	object := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: decoded("team-a"), Name: decoded(name), UID: "uid-" + "1", ResourceVersion: decoded("42"),
			Labels:          map[string]string{decoded("app.kubernetes.io/name"): decoded("web")},
			Annotations:     map[string]string{decoded("last-applied"): decoded(long)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: decoded("apps/v1"), Kind: decoded("ReplicaSet"), Name: decoded("web-1")}},
			Finalizers:      []string{decoded("example.com/keep")},
		}}
	}
	a, b := object("a"), object("b")
	Meta(a)
	Meta(b)
	require.Equal(t, "team-a", a.Namespace)
	require.True(t, sameString(a.Namespace, b.Namespace))
	require.True(t, sameString(a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind))
	require.True(t, sameString(a.Finalizers[0], b.Finalizers[0]))
	require.Equal(t, map[string]string{"app.kubernetes.io/name": "web"}, b.Labels)
	for k, v := range a.Labels {
		for k2, v2 := range b.Labels {
			require.True(t, sameString(k, k2) && sameString(v, v2), "label key and value shared")
		}
	}
	require.False(t, sameString(a.ResourceVersion, b.ResourceVersion), "resourceVersions are not interned")
	require.False(t, sameString(a.OwnerReferences[0].Name, b.OwnerReferences[0].Name))
	require.False(t, sameString(a.Annotations["last-applied"], b.Annotations["last-applied"]), "long values are not interned")
	require.Equal(t, long, b.Annotations["last-applied"])

	pa := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: decoded("meta.k8s.io/v1"), Kind: decoded("PartialObjectMetadata")}}
	pb := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: decoded("meta.k8s.io/v1"), Kind: decoded("PartialObjectMetadata")}}
	Meta(pa)
	Meta(pb)
	require.True(t, sameString(pa.Kind, pb.Kind) && sameString(pa.APIVersion, pb.APIVersion))

	// Unstructured objects and tombstones are left as they are.
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": "team-a"}}}
	Meta(u)
	require.Equal(t, "team-a", u.GetNamespace())
	Meta(nil)
}

// The table starts again once full: it cannot grow without end, and what it held before stays
// correct.
func TestTableIsBounded(t *testing.T) {
	first := String(decoded("bounded-first"))
	for i := range maxEntries + 10 {
		_ = String(decoded("v" + strings.Repeat("y", i%50) + strconv.Itoa(i)))
	}
	require.LessOrEqual(t, interned.entries.Load(), int64(maxEntries))
	require.Equal(t, "bounded-first", first)
	require.Equal(t, "bounded-first", String(decoded("bounded-first")))
}
