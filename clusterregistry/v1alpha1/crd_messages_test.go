package v1alpha1

import (
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// ValidateCluster and the CRD say the same thing about the same mistake: the CRD's messages are
// written in markers, ValidateCluster's in constants, so a test holds them together.
func TestCRDMessagesMatchValidateCluster(t *testing.T) {
	data, err := os.ReadFile("../crd/clusterregistry.k8s.io_clusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	var all []string
	var walk func(s *apiextensionsv1.JSONSchemaProps)
	walk = func(s *apiextensionsv1.JSONSchemaProps) {
		for _, r := range s.XValidations {
			all = append(all, r.Message, r.MessageExpression)
		}
		for _, child := range s.Properties {
			walk(&child)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(s.Items.Schema)
		}
	}
	walk(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
	text := strings.Join(all, "\n")
	// CEL escapes the apostrophes of single-quoted strings.
	text = strings.ReplaceAll(text, `\'`, `'`)
	for _, msg := range []string{msgCABundleBase64, msgCABundleCerts, msgCABundlePrivateKey, msgCredentialKey, msgCredentialValue} {
		if !strings.Contains(text, msg) {
			t.Errorf("no CRD rule says %q", msg)
		}
	}
}
