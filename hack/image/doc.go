// Command image builds the clusterregistry command's container image without a container daemon
// or a registry: the command, built static for Linux, on an empty base (nothing to download),
// run as a numeric non-root user (65532), written as an OCI image layout (a directory that
// `crane push`, `skopeo copy oci:DIR` or `podman load` take) and, with --tarball, as a tarball
// that `docker load` takes.
//
//	go run ./hack/image --out _output/image --tarball _output/clusterregistry.tar
//	go run ./hack/image --command ./cmd/fleet-api --out _output/fleet-api   # ghcr.io/cluster-registry/fleet-api:dev
//
// The image is reproducible: the same sources, Go and flags give the same digest (file times
// and the image's creation time come from SOURCE_DATE_EPOCH, or the commit's time).
package main
