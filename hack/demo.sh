#!/usr/bin/env bash
# The README's one-command demo: builds the real kube-apiserver, etcd and kubectl when they are not
# cached yet, builds examples/fanout-deploy, starts a local fleet (a registry and three members),
# runs the health controller and fanout-deploy across it, stops a member and runs fanout-deploy
# again, brings the member back, then cleans up, Ctrl-C included.
# Pass -keep to leave the fleet running until Ctrl-C (its controllers and fleet-api too), and
# -screenshot FILE to save fleet-api's dashboard as a PNG (README's docs/images/fleet-api.png).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBEBUILDER_ASSETS="$(hack/build-testbins.sh)"
export KUBEBUILDER_ASSETS
# -screenshot drives headless Chromium: Debian's package, installed when missing (as root).
for arg in "$@"; do
  case "$arg" in
  -screenshot | -screenshot=* | --screenshot | --screenshot=*)
    CHROMIUM="$(hack/install-chromium.sh | tail -n 1)"
    export CHROMIUM
    ;;
  esac
done
# Built and exec'd rather than go run, so that Ctrl-C reaches the demo itself and it can clean up.
go build -o bin/fanout-deploy ./examples/fanout-deploy
go build -o bin/fleet-api ./cmd/fleet-api
go build -o bin/clusterregistry ./cmd/clusterregistry
go build -o bin/demo ./hack/demo
exec bin/demo -fanout-deploy bin/fanout-deploy -fleet-api bin/fleet-api -clusterregistry bin/clusterregistry "$@"
