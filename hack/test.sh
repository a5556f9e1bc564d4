#!/usr/bin/env bash
# The project's test command (README.md): builds the real kube-apiserver, etcd and kubectl when they
# are not cached yet, finds or installs headless Chromium (hack/install-chromium.sh), then runs every test with the race detector. Extra arguments go to go test,
# for example: hack/test.sh -run TestValidate ./clusterregistry/...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBEBUILDER_ASSETS="$(hack/build-testbins.sh)"
export KUBEBUILDER_ASSETS
# The dashboard's test drives a real headless Chromium: Debian's package, installed when missing
# (as root), or a clear failure saying how to get one.
CHROMIUM="$(hack/install-chromium.sh | tail -n 1)"
export CHROMIUM

# Test binaries, and the commands tests build, are linked without a symbol table or DWARF: a
# run links some 40 binaries of 60-120 MB, and -s takes a third off each link (the race pass's
# links: 293 CPU-s, 181 with -s). Panics and goleak still print stacks (they use pclntab,
# which -s keeps). An -ldflags on the command line replaces this one.
#
# And with -trimpath: without it, the build cache keys the module's own packages by the
# checkout's directory (their paths are compiled in), so a fresh clone, as CI makes, compiled
# every one of them again (delivery's race test binary: 22 CPU-s in a new clone, 5 with
# -trimpath once built in any). Stacks then name files by module path.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-ldflags=-s -trimpath"

if [ "$#" -eq 0 ]; then
  set -- ./...
fi
# A package's tests may take longer than go test's default 10 minutes on a loaded 2-core machine:
# clusterregistry's upgrade test builds the last release's command from its tree first.
# hack/gotest.sh is go test that keeps the linked test binaries between runs (it says why).
exec hack/gotest.sh -race -count=1 -timeout=30m "$@"
