#!/usr/bin/env bash
# Compares the exported API of the module's public packages with the last release's (the commit
# recorded in hack/last-release) using apidiff, and fails on an incompatible change that
# CHANGELOG.md's Unreleased section does not name under "### Breaking" (hack/apicompat).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
module=github.com/cluster-registry/sdk
read -r version commit < hack/last-release
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "verify-apidiff: $version's commit $commit is not in this clone; it needs main's history (git fetch --unshallow)" >&2
  exit 1
fi
bin="$(hack/lint-tools.sh)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The release's API is the same every run: kept by its commit, apidiff's build and Go's version.
CACHE_ROOT="${CLUSTER_REGISTRY_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-registry-sdk}"
key="$( { echo "$commit"; go version; sha256sum < "$bin/apidiff"; } | sha256sum | cut -c1-32)"
old_export="$CACHE_ROOT/apidiff/$key.export"
if [ ! -s "$old_export" ]; then
  mkdir "$tmp/old"
  git archive "$commit" | tar -x -C "$tmp/old"
  # apidiff names each internal package it skips on stderr; keep that out of the way unless it fails.
  (cd "$tmp/old" && "$bin/apidiff" -m -w "$tmp/old.export" "$module") 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
  mkdir -p "$(dirname "$old_export")"
  cp "$tmp/old.export" "$old_export.tmp.$$" && mv "$old_export.tmp.$$" "$old_export"
fi
cp "$old_export" "$tmp/old.export"
"$bin/apidiff" -m -w "$tmp/new.export" "$module" 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
"$bin/apidiff" -m -incompatible "$tmp/old.export" "$tmp/new.export" > "$tmp/all" 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
# testkit/ is the SDK's own test kit: importable, with no compatibility promise (testkit/doc.go).
# Commands (package main: cmd/, examples/, hack/) cannot be imported, so their exported names
# are no one's API; their flags and output are, and CHANGELOG says when those change.
printf '%s\n' '^- \./testkit/' > "$tmp/skip"
go list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./... | sed -n "s|^$module/\(.*\)|^- ./\1.|p" | sed 's/\./\\./g' >> "$tmp/skip"
grep -v -f "$tmp/skip" "$tmp/all" > "$tmp/incompatible" || true
go run ./hack/apicompat CHANGELOG.md < "$tmp/incompatible"
echo "verify-apidiff: compared with $version ($commit): $(wc -l < "$tmp/incompatible") incompatible changes, each named in CHANGELOG.md"
