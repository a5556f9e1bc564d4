package chartrender

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DecodeForTest is decode, for the tests' reading of what Helm printed.
func DecodeForTest(doc string) ([]*unstructured.Unstructured, error) {
	return decode("helm template", []byte(doc))
}

// HelmOwnForTest is helmOwn's names, sorted.
func HelmOwnForTest() []string {
	var out []string
	for name := range helmOwn {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
