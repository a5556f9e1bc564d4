// Package v1alpha1 is the clusterregistry.k8s.io/v1alpha1 API: the Cluster kind that records where a
// member cluster's API server is, how callers should reach it, and pointers to the credentials they
// should use, never the credentials themselves.
//
// Beside the generated deep-copy code it holds the hand-written helpers a client needs before it
// talks to the server: well-known condition and provider type names, condition accessors, and
// ValidateCluster, which applies the same rules as the CRD's server-side validation so a tool can
// reject bad input before it sends it.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=clusterregistry.k8s.io
package v1alpha1
