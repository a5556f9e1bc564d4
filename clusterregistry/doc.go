// Package clusterregistry holds the Cluster CRD, generated from the clusterregistry.k8s.io/v1alpha1
// types and embedded in the binary, and Install, which creates or upgrades it in any Kubernetes API
// server and waits until the server serves it. That is all a cluster needs to become a registry.
//
// The API types are in the v1alpha1 subpackage; the generated clientset, listers, informers and
// apply configurations are in the module's clientset, listers, informers and applyconfiguration
// packages.
package clusterregistry
