#!/usr/bin/env bash
# The project's test command (README.md): builds the real kube-apiserver, etcd and kubectl when they
# are not cached yet, then runs every test with the race detector. Extra arguments go to go test,
# for example: hack/test.sh -run TestValidate ./clusterregistry/...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBEBUILDER_ASSETS="$(hack/build-testbins.sh)"
export KUBEBUILDER_ASSETS

if [ "$#" -eq 0 ]; then
  set -- ./...
fi
go test -race -count=1 "$@"
