#!/usr/bin/env bash
# Fails when generated code or the CRD differs from what hack/update-codegen.sh would write now:
# generated files are never edited by hand.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GENERATED=(clusterregistry clientset informers listers applyconfiguration internal/openapi)

# The generators are deterministic: the same inputs give the same files. A run that verified
# these exact files (the generated ones, the types they come from, the generators' versions and
# every script and program update-codegen.sh runs) leaves a stamp named by their digest, and the
# next run with the same digest need not generate again, which takes some three minutes of CPU.
# VERIFY_CODEGEN_FRESH=1 generates and compares whatever the stamps say.
CACHE_ROOT="${CLUSTER_REGISTRY_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-registry-sdk}"
digest="$(
  cd "$ROOT"
  {
    go version
    find "${GENERATED[@]}" hack/models-schema hack/crdpatch hack/tools/go.mod hack/tools/go.sum \
      hack/boilerplate.go.txt hack/api-rules-violations.list hack/update-codegen.sh \
      hack/verify-codegen.sh go.mod go.sum -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-32
)"
stamp="$CACHE_ROOT/verified-codegen/$digest"
if [ "${VERIFY_CODEGEN_FRESH:-0}" != 1 ] && [ -e "$stamp" ]; then
  echo "verify-codegen: generated files are up to date (these exact inputs and files were verified before: $digest)"
  exit 0
fi

SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
cp -a "$ROOT/go.mod" "$ROOT/go.sum" "$SCRATCH/"
for d in "${GENERATED[@]}"; do
  if [ -e "$ROOT/$d" ]; then
    mkdir -p "$(dirname "$SCRATCH/$d")"
    cp -a "$ROOT/$d" "$SCRATCH/$d"
  fi
done
# update-codegen.sh runs this in the tree it generates into, against that tree's generated code.
mkdir -p "$SCRATCH/hack"
cp -a "$ROOT/hack/models-schema" "$SCRATCH/hack/"

"$ROOT/hack/update-codegen.sh" "$SCRATCH" >/dev/null

status=0
for d in "${GENERATED[@]}"; do
  if ! diff -Nru "$ROOT/$d" "$SCRATCH/$d"; then
    status=1
  fi
done
if [ "$status" -ne 0 ]; then
  echo "verify-codegen: generated files are out of date; run hack/update-codegen.sh" >&2
  exit 1
fi
mkdir -p "$(dirname "$stamp")"
touch "$stamp"
echo "verify-codegen: generated files are up to date"
