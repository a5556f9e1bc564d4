#!/usr/bin/env bash
# Builds the real kube-apiserver, kubectl and etcd that the tests run, and the kube-controller-
# manager, kube-scheduler and KWOK that members with workloads run (localfleet.Options.Workloads),
# from the Go module proxy, because setup-envtest's download site is not reachable from every
# machine this project runs on.
#
# Binaries are cached outside the repository, keyed by version, so only the first run pays for the
# build (about 10 minutes cold on 2 cores). On success the last line printed is the envtest assets
# directory holding every binary; tests find it through KUBEBUILDER_ASSETS.
#
# Usage: hack/build-testbins.sh                 build what is missing, print the assets directory
#        hack/build-testbins.sh --print         print the assets directory; fail if anything is missing
#        hack/build-testbins.sh --servers-only  only kube-apiserver, kubectl and etcd, for a version
#                                               whose members run no workloads (the skew pass's oldest)
#        hack/build-testbins.sh --kubectl-only  build only kubectl, print the directory holding it
#                                               (version skew needs an older kubectl, not its server)
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
# konnectivity's agent, for members reached through a tunnel (package tunnel).
ANP_VERSION="${ANP_VERSION:-v0.34.0}"
CACHE_ROOT="${CLUSTER_REGISTRY_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-registry-sdk}"
KUBE_DIR="$CACHE_ROOT/kubernetes-$KUBE_VERSION"
ETCD_DIR="$CACHE_ROOT/etcd-$ETCD_VERSION"
KWOK_DIR="$CACHE_ROOT/kwok-$KWOK_VERSION"
ANP_DIR="$CACHE_ROOT/konnectivity-$ANP_VERSION"
ASSETS_DIR="$CACHE_ROOT/assets/kubernetes-$KUBE_VERSION-etcd-$ETCD_VERSION"

log() { echo "build-testbins: $*" >&2; }

# The Kubernetes binaries: kube-apiserver and kubectl for every test; kube-controller-manager and
# kube-scheduler, with KWOK, for members that run workloads (localfleet.Options.Workloads).
all_kube_bins="kube-apiserver kubectl kube-controller-manager kube-scheduler"
workloads=1
if [ "${1:-}" = "--servers-only" ]; then
  all_kube_bins="kube-apiserver kubectl"
  workloads=0
fi

have_all() {
  for bin in $all_kube_bins; do [ -x "$KUBE_DIR/$bin" ] || return 1; done
  [ -x "$ETCD_DIR/etcd" ] && { [ "$workloads" = 0 ] || { [ -x "$KWOK_DIR/kwok" ] && [ -x "$ANP_DIR/konnectivity-agent" ]; }; }
}

link_assets() {
  mkdir -p "$ASSETS_DIR"
  for bin in $all_kube_bins; do ln -sf "$KUBE_DIR/$bin" "$ASSETS_DIR/$bin"; done
  ln -sf "$ETCD_DIR/etcd" "$ASSETS_DIR/etcd"
  if [ "$workloads" = 1 ]; then
    ln -sf "$KWOK_DIR/kwok" "$ASSETS_DIR/kwok"
    ln -sf "$ANP_DIR/konnectivity-agent" "$ASSETS_DIR/konnectivity-agent"
  fi
  echo "$ASSETS_DIR"
}

if [ "${1:-}" = "--print" ]; then
  have_all || { log "binaries missing; run hack/build-testbins.sh"; exit 1; }
  link_assets
  exit 0
fi

# Two runs at once (a demo in one terminal, the tests in another) take turns on each directory
# they build into: the second waits for the first, then finds what it built. Without the lock each
# removed the other's half-built directory and moved a partial one into place. A lock is a
# version's, so that the version skew pass's older kubectl never holds up the newest build.
mkdir -p "$CACHE_ROOT"
# lock DIR holds DIR's lock (fd 9) until unlock.
lock() {
  exec 9>"$1.lock"
  if ! flock -n 9; then
    log "another hack/build-testbins.sh is building $1; waiting for it"
    flock 9
  fi
}
unlock() { exec 9>&-; }

# The Kubernetes binaries to build: kube-apiserver is most of the cold build's time.
kube_bins="$all_kube_bins"
if [ "${1:-}" = "--kubectl-only" ]; then
  kube_bins="kubectl"
fi

# staging_replaces MODULE VERSION PATTERN prints a replace line for every local (./ or ../) replace
# in MODULE@VERSION's go.mod whose path matches PATTERN, pinned to STAGING_VERSION. Those replaces
# point into the upstream repository and are ignored once the module is a dependency, so the
# throwaway module must restate them against published versions.
staging_replaces() {
  local gomod="$1" pattern="$2" version="$3"
  awk -v pat="$pattern" -v ver="$version" '
    /^replace *\(/ { inblock = 1; next }
    /^replace [^(]/ && $3 == "=>" && $4 ~ /^\.\.?\// && $2 ~ pat { printf "replace %s => %s %s\n", $2, $2, ver; next }
    inblock && /^\)/ { inblock = 0; next }
    inblock && $2 == "=>" && $3 ~ /^\.\.?\// && $1 ~ pat { printf "replace %s => %s %s\n", $1, $1, ver }
  ' "$gomod"
}

# build_in_module DIR MODULE VERSION STAGING_PATTERN STAGING_VERSION LDFLAGS OUT PKG...
build_in_module() {
  local dir="$1" module="$2" version="$3" pattern="$4" sversion="$5" ldflags="$6" out="$7"
  shift 7
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  (
    cd "$work"
    cat >go.mod <<MOD
module testbins

go 1.26

require $module $version
MOD
    local gomod
    gomod="$(GOFLAGS=-mod=mod go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    staging_replaces "$gomod" "$pattern" "$sversion" >>go.mod
    mkdir -p "$out"
    for pkg in "$@"; do
      log "building $pkg@$version"
      CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$out/" "$pkg"
    done
  )
}

lock "$KUBE_DIR"
missing_pkgs=""
for bin in $kube_bins; do
  [ -x "$KUBE_DIR/$bin" ] || missing_pkgs+=" k8s.io/kubernetes/cmd/$bin"
done
if [ -n "$missing_pkgs" ]; then
  minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  staging="v0.${KUBE_VERSION#v1.}"
  vpkgs="k8s.io/component-base/version k8s.io/client-go/pkg/version"
  ldflags="-s -w"
  for p in $vpkgs; do
    ldflags+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  # Build into a temporary directory beside the cache, then move each binary in: a build that is
  # cut off never leaves a half-written binary that a later run would take for a finished one.
  tmp="$KUBE_DIR.tmp"
  rm -rf "$tmp"
  # shellcheck disable=SC2086 # one package per word
  build_in_module "$KUBE_DIR" k8s.io/kubernetes "$KUBE_VERSION" '^k8s\.io/' "$staging" "$ldflags" "$tmp" $missing_pkgs
  mkdir -p "$KUBE_DIR"
  for f in "$tmp"/*; do mv -f "$f" "$KUBE_DIR/"; done
  rm -rf "$tmp"
fi
unlock

if [ "${1:-}" = "--kubectl-only" ]; then
  [ -x "$KUBE_DIR/kubectl" ] || { log "build finished but kubectl is missing under $KUBE_DIR"; exit 1; }
  echo "$KUBE_DIR"
  exit 0
fi

lock "$ETCD_DIR"
if [ ! -x "$ETCD_DIR/etcd" ]; then
  tmp="$ETCD_DIR.tmp"
  rm -rf "$tmp"
  build_in_module "$ETCD_DIR" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" '^go\.etcd\.io/etcd/' "$ETCD_VERSION" "-s -w" "$tmp" \
    go.etcd.io/etcd/server/v3
  mv "$tmp/v3" "$tmp/etcd" 2>/dev/null || mv "$tmp/server" "$tmp/etcd" 2>/dev/null || true
  rm -rf "$ETCD_DIR"; mv "$tmp" "$ETCD_DIR"
fi
unlock

# KWOK simulates Nodes and their Pods' lifecycle; it builds with plain go build.
lock "$KWOK_DIR"
if [ "$workloads" = 1 ] && [ ! -x "$KWOK_DIR/kwok" ]; then
  tmp="$KWOK_DIR.tmp"
  rm -rf "$tmp"
  build_in_module "$KWOK_DIR" sigs.k8s.io/kwok "$KWOK_VERSION" '^$' "" "-s -w" "$tmp" \
    sigs.k8s.io/kwok/cmd/kwok
  rm -rf "$KWOK_DIR"; mv "$tmp" "$KWOK_DIR"
fi
unlock

# konnectivity's stock agent, built from its own module at its own versions as kube-apiserver is;
# its go.mod replaces konnectivity-client with its own directory, restated here as the release.
lock "$ANP_DIR"
if [ "$workloads" = 1 ] && [ ! -x "$ANP_DIR/konnectivity-agent" ]; then
  tmp="$ANP_DIR.tmp"
  rm -rf "$tmp"
  build_in_module "$ANP_DIR" sigs.k8s.io/apiserver-network-proxy "$ANP_VERSION" '^sigs\.k8s\.io/apiserver-network-proxy/konnectivity-client$' "$ANP_VERSION" "-s -w" "$tmp" \
    sigs.k8s.io/apiserver-network-proxy/cmd/agent
  mv "$tmp/agent" "$tmp/konnectivity-agent"
  rm -rf "$ANP_DIR"; mv "$tmp" "$ANP_DIR"
fi
unlock

have_all || { log "build finished but a binary is missing under $CACHE_ROOT"; exit 1; }
link_assets
