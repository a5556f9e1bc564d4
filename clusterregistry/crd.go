package clusterregistry

import (
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed crd/clusterregistry.k8s.io_clusters.yaml
var crdYAML []byte

// CRDName is the name of the Cluster CustomResourceDefinition.
const CRDName = "clusters.clusterregistry.k8s.io"

// CRDYAML returns the Cluster CRD manifest, as `kubectl apply -f` takes it.
func CRDYAML() []byte {
	return append([]byte(nil), crdYAML...)
}

// CRD returns the Cluster CRD. Each call returns a new object that the caller may change.
func CRD() *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
		// The manifest is generated and embedded at build time, and a test decodes it.
		panic(fmt.Sprintf("clusterregistry: embedded CRD does not decode: %v", err))
	}
	return crd
}
