package chartrender

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// DecodeForTest is decode, for the tests' reading of what Helm printed.
func DecodeForTest(doc string) ([]*unstructured.Unstructured, error) {
	return decode("helm template", []byte(doc))
}
