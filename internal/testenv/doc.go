// Package testenv starts the real kube-apiserver and etcd that this module's integration tests run
// against, through controller-runtime's envtest, with the Cluster CRD installed by
// clusterregistry.Install. The binaries come from hack/build-testbins.sh, which builds them from the
// Go module proxy; the README's test command runs it first.
package testenv
