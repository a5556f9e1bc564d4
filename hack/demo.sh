#!/usr/bin/env bash
# The main job, as README.md gives it: builds the real kube-apiserver, etcd and kubectl when they
# are not cached yet, starts a local cluster registry, applies the samples and shows them with
# kubectl, then cleans up. Pass -keep to leave the registry running until Ctrl-C.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBEBUILDER_ASSETS="$(hack/build-testbins.sh)"
export KUBEBUILDER_ASSETS
# Built and exec'd rather than go run, so that Ctrl-C reaches the demo itself and it can clean up.
go build -o bin/demo ./hack/demo
exec bin/demo "$@"
