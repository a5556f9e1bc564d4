#!/usr/bin/env bash
# staticcheck (pinned in hack/lint/go.mod) over the hand-written packages. The generated clientset,
# informers, listers and apply configurations, and the OpenAPI definitions, are k8s.io/code-generator's
# and openapi-gen's output, which
# hack/verify-codegen.sh keeps identical to what the generator writes; they are not edited here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin="$(hack/lint-tools.sh)"
mapfile -t packages < <(go list ./... | grep -v -e '/clientset/' -e '/informers/' -e '/listers/' -e '/applyconfiguration' -e '/internal/openapi$')
# The packages are loaded as the tests build them, with -race: their compiled export data is
# then the tests' (Go's build cache), not a second build of every dependency without it (in a
# cold cache, go vet's non-race build of delivery alone took 411 CPU-s, against 60 after the
# tests' race build). No hand-written file depends on the race build tag.
GOFLAGS="${GOFLAGS:+$GOFLAGS }-race" "$bin/staticcheck" "${packages[@]}"
echo "staticcheck: ${#packages[@]} packages, no findings"
