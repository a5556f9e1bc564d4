#!/usr/bin/env bash
# Builds the pinned lint tools (staticcheck, apidiff; versions in hack/lint/go.mod) from the Go
# module proxy and prints the directory that holds them. Go's build cache makes a warm run quick.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CACHE_ROOT="${CLUSTER_REGISTRY_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-registry-sdk}"
dir="$CACHE_ROOT/lint-tools"
mkdir -p "$dir"
go build -C hack/lint -o "$dir/" honnef.co/go/tools/cmd/staticcheck golang.org/x/exp/cmd/apidiff
echo "$dir"
