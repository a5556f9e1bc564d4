#!/usr/bin/env bash
# Fails when generated code or the CRD differs from what hack/update-codegen.sh would write now:
# generated files are never edited by hand.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

GENERATED=(clusterregistry clientset informers listers applyconfiguration internal/openapi)
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
echo "verify-codegen: generated files are up to date"
