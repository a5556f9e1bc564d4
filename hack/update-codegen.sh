#!/usr/bin/env bash
# Regenerates everything derived from clusterregistry/v1alpha1: deep-copy functions, the clientset
# (typed and fake), listers, informers, apply configurations, and the CRD manifest.
# The generators' versions are pinned in hack/tools/go.mod, a module of its own so that tool
# authors who import the SDK do not inherit the generators' dependencies.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT}" # verify-codegen.sh passes a scratch copy of the tree
MODULE=github.com/cluster-registry/sdk
TOOLS_MOD="$ROOT/hack/tools/go.mod"
BOILERPLATE="$ROOT/hack/boilerplate.go.txt"

CODEGEN_PKG="$(cd "$ROOT/hack/tools" && go mod download k8s.io/code-generator && go list -m -f '{{.Dir}}' k8s.io/code-generator)"
# shellcheck source=/dev/null
source "$CODEGEN_PKG/kube_codegen.sh"

cd "$OUT"
kube::codegen::gen_helpers --boilerplate "$BOILERPLATE" clusterregistry

# OpenAPI definitions of the types, and from them the schema that applyconfiguration-gen embeds so
# that the fake clientset's NewClientset tracks field ownership for Clusters as a server does.
# A new API rule violation fails the generation. hack/api-rules-violations.list holds the accepted
# ones: apimachinery's own, and kubernetesApiEndpoints, whose JSON name predates the rule and is
# part of the API.
kube::codegen::gen_openapi \
  --report-filename "$ROOT/hack/api-rules-violations.list" \
  --output-dir "$OUT/internal/openapi" \
  --output-pkg "$MODULE/internal/openapi" \
  --extra-pkgs k8s.io/apimachinery/pkg/util/intstr \
  --boilerplate "$BOILERPLATE" \
  clusterregistry
SCHEMA="$(mktemp)"
trap 'rm -f "$SCHEMA"' EXIT
go run ./hack/models-schema >"$SCHEMA"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --applyconfig-openapi-schema "$SCHEMA" \
  --output-dir "$OUT" \
  --output-pkg "$MODULE" \
  --boilerplate "$BOILERPLATE" \
  --one-input-api clusterregistry \
  .

go tool -modfile="$TOOLS_MOD" controller-gen \
  crd:crdVersions=v1 \
  paths=./clusterregistry/... \
  output:crd:artifacts:config=clusterregistry/crd
(cd "$ROOT" && go run ./hack/crdpatch "$OUT"/clusterregistry/crd/clusterregistry.k8s.io_*.yaml)
