package clusterregistry

import (
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

var (
	//go:embed crd/clusterregistry.k8s.io_clusters.yaml
	clusterCRDYAML []byte
	//go:embed crd/clusterregistry.k8s.io_placements.yaml
	placementCRDYAML []byte
	//go:embed crd/clusterregistry.k8s.io_releases.yaml
	releaseCRDYAML []byte
	//go:embed crd/clusterregistry.k8s.io_releasestatusslices.yaml
	releaseStatusSliceCRDYAML []byte
)

// CRDName is the name of the Cluster CustomResourceDefinition.
const CRDName = "clusters.clusterregistry.k8s.io"

// PlacementCRDName is the name of the Placement CustomResourceDefinition.
const PlacementCRDName = "placements.clusterregistry.k8s.io"

// ReleaseCRDName is the name of the Release CustomResourceDefinition.
const ReleaseCRDName = "releases.clusterregistry.k8s.io"

// ReleaseStatusSliceCRDName is the name of the ReleaseStatusSlice CustomResourceDefinition.
const ReleaseStatusSliceCRDName = "releasestatusslices.clusterregistry.k8s.io"

// CRDYAML returns the manifests of the registry's CRDs (Clusters, Placements, Releases and
// ReleaseStatusSlices) as one YAML stream, as `kubectl apply -f` takes it.
func CRDYAML() []byte {
	var out []byte
	for _, m := range [][]byte{clusterCRDYAML, placementCRDYAML, releaseCRDYAML, releaseStatusSliceCRDYAML} {
		out = append(out, m...)
	}
	return out
}

// CRD returns the Cluster CRD. Each call returns a new object that the caller may change.
func CRD() *apiextensionsv1.CustomResourceDefinition { return decodeCRD(clusterCRDYAML) }

// PlacementCRD returns the Placement CRD. Each call returns a new object that the caller may
// change.
func PlacementCRD() *apiextensionsv1.CustomResourceDefinition { return decodeCRD(placementCRDYAML) }

// ReleaseCRD returns the Release CRD. Each call returns a new object that the caller may change.
func ReleaseCRD() *apiextensionsv1.CustomResourceDefinition { return decodeCRD(releaseCRDYAML) }

// ReleaseStatusSliceCRD returns the ReleaseStatusSlice CRD. Each call returns a new object that
// the caller may change.
func ReleaseStatusSliceCRD() *apiextensionsv1.CustomResourceDefinition {
	return decodeCRD(releaseStatusSliceCRDYAML)
}

// CRDs returns every CRD of the registry's API, the Cluster CRD first: what Install installs.
func CRDs() []*apiextensionsv1.CustomResourceDefinition {
	return []*apiextensionsv1.CustomResourceDefinition{CRD(), PlacementCRD(), ReleaseCRD(), ReleaseStatusSliceCRD()}
}

func decodeCRD(manifest []byte) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(manifest, crd); err != nil {
		// The manifests are generated and embedded at build time, and a test decodes them.
		panic(fmt.Sprintf("clusterregistry: embedded CRD does not decode: %v", err))
	}
	return crd
}
