#!/usr/bin/env bash
# go test, with the test binaries kept between runs: hack/test.sh and hack/verify-skew.sh run the
# tests through this.
#
# Why: go test links every test binary again on every run, even when nothing it holds changed,
# and this module's test binaries are large (60-120 MB, with Helm and client-go): linking them was
# about a sixth of a CI run's CPU (309 CPU-s of link and 47 of ld in a 937 s run on 2 cores).
# "go test -c -o DIR/" keeps a binary that is up to date and links only the ones whose inputs
# changed; the binaries live in the cache directory hack/build-testbins.sh uses, one directory
# per set of build flags, so a fresh clone (as CI makes) reuses them.
#
# Usage is go test's: build flags (-race, -tags, ...), test flags (-run, -skip, -count, -timeout,
# -v, ...) and packages (./..., ./pkg/, or the module's import paths). It builds every package's
# test binary first, then runs them, -p at a time (GOFLAGS' -p, else the number of CPUs), the
# packages that take longest first, and prints go test's "ok" and "FAIL" lines. A flag it does
# not know, or -json, -c, -bench, -cover or -fuzz, falls back to plain go test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

module=github.com/cluster-registry/sdk
CACHE_ROOT="${CLUSTER_REGISTRY_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-registry-sdk}"

plain() { exec go test "$@"; }

# Test flags the binaries take as -test.NAME; those in the second list take a value.
test_bool=" v short failfast benchmem fullpath "
test_value=" run skip count timeout parallel cpu shuffle list "
# Build flags that take a value (the rest of go test's build flags are booleans).
build_value=" p tags ldflags gcflags asmflags mod modfile overlay pgo vet toolexec "
build=() run=() pkgs=() verbose=false
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  arg="${args[i]}"
  case "$arg" in
    ./* | ../* | "$module" | "$module"/*) pkgs+=("$arg"); continue ;;
    -*) ;;
    *) plain "$@" ;; # a package pattern of another shape
  esac
  name="${arg#-}"; name="${name#-}"; value=""; has_value=false
  if [[ "$name" == *=* ]]; then value="${name#*=}"; name="${name%%=*}"; has_value=true; fi
  if [[ "$test_bool" == *" $name "* ]]; then
    if [ "$has_value" = true ]; then run+=("-test.$name=$value"); else run+=("-test.$name"); fi
    if [ "$name" = v ] && [ "$value" != false ]; then verbose=true; fi
  elif [[ "$test_value" == *" $name "* ]]; then
    if [ "$has_value" = false ]; then i=$((i + 1)); value="${args[i]:-}"; fi
    run+=("-test.$name=$value")
  elif [[ "$build_value" == *" $name "* ]]; then
    if [ "$has_value" = false ]; then i=$((i + 1)); value="${args[i]:-}"; fi
    build+=("-$name=$value")
  elif [[ " race msan asan trimpath a n x work buildvcs linkshared " == *" $name "* ]]; then
    build+=("$arg")
  else
    plain "$@" # -json, -c, -bench, -cover, -fuzz, -o, ... as go test has them
  fi
done
if [ "${#pkgs[@]}" -eq 0 ]; then pkgs=(.); fi
# go test gives a test binary ten minutes unless told otherwise; so does this.
if [[ " ${run[*]} " != *" -test.timeout="* ]]; then run+=("-test.timeout=10m"); fi

jobs="$(nproc)"
for f in ${GOFLAGS:-} "${build[@]}"; do
  case "$f" in -p=*) jobs="${f#-p=}" ;; esac
done

# One directory per build configuration: a race binary and a plain one of the same package differ.
key="$(printf '%s\n' "${build[@]}" "${GOFLAGS:-}" "$(go env GOOS GOARCH)" | sha256sum | cut -c1-12)"
bindir="$CACHE_ROOT/testbin/$key"

# The packages with tests, as "import-path directory"; and the ones without, which go test names.
mapfile -t tested < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "${pkgs[@]}" | sed '/^$/d')
while read -r p; do printf '?   \t%s\t[no test files]\n' "$p"; done < <(go list -f '{{if not (or .TestGoFiles .XTestGoFiles)}}{{.ImportPath}}{{end}}' "${pkgs[@]}" | sed '/^$/d')
if [ "${#tested[@]}" -eq 0 ]; then exit 0; fi

# go test -c -o DIR/ names a binary after the package's last path element, and refuses two of the
# same name (clusterregistry and cmd/clusterregistry): such packages are built into groups of
# their own, one go test -c per group.
declare -A group_of=() binary=()
groups=()
for line in "${tested[@]}"; do
  path="${line%% *}"; base="${path##*/}"
  g=0
  while [[ " ${groups[$g]:-} " == *" $base "* ]]; do g=$((g + 1)); done
  groups[g]="${groups[$g]:-} $base"
  group_of[$path]=$g
  binary[$path]="$bindir/$g/$base.test"
done
status=0
for ((g = 0; g < ${#groups[@]}; g++)); do
  members=()
  for line in "${tested[@]}"; do
    path="${line%% *}"
    if [ "${group_of[$path]}" = "$g" ]; then members+=("$path"); fi
  done
  mkdir -p "$bindir/$g"
  go test -c "${build[@]}" -o "$bindir/$g/" "${members[@]}" || status=$?
done
if [ "$status" -ne 0 ]; then
  echo "FAIL (build)"
  exit "$status"
fi

# The packages that take longest run first, so that the run does not end on one of them alone;
# this order is only a schedule, and a package missing from it runs after these.
long="cmd/clusterregistry health multicluster clusterregistry cmd/fleet-api examples/fanout-deploy hack/image delivery localfleet access rotation fleetcache internal/readme clusterprofile join"
order=()
declare -A placed=()
for p in $long; do
  for line in "${tested[@]}"; do
    if [ "${line%% *}" = "$module/$p" ]; then order+=("$line"); placed[$module/$p]=1; fi
  done
done
for line in "${tested[@]}"; do
  if [ -z "${placed[${line%% *}]:-}" ]; then order+=("$line"); fi
done

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
# run_one PATH DIR BINARY: runs one package's test binary in the package's directory, as go test
# does, and prints its result line (with its output when it failed, or with -v) in one piece.
# Results are never cached: every run runs every test, as go test -count=1 does.
run_one() {
  local path="$1" dir="$2" bin="$3" name="$logs/${1//\//_}" start rc=0
  start="$(date +%s%N)"
  (cd "$dir" && exec "$bin" -test.paniconexit0 "${run[@]}") >"$name.log" 2>&1 || rc=$?
  local took
  took="$(awk -v s="$start" -v e="$(date +%s%N)" 'BEGIN { printf "%.3fs", (e - s) / 1e9 }')"
  {
    if [ "$rc" -ne 0 ] || [ "$verbose" = true ]; then cat "$name.log"; fi
    if [ "$rc" -eq 0 ]; then printf 'ok  \t%s\t%s\n' "$path" "$took"; else printf 'FAIL\t%s\t%s\n' "$path" "$took"; fi
  } | { flock 9; cat; } 9>>"$logs/print.lock"
  echo "$rc" >"$name.rc"
}
for line in "${order[@]}"; do
  path="${line%% *}"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_one "$path" "${line#* }" "${binary[$path]}" &
done
wait
failed=0
for line in "${order[@]}"; do
  name="$logs/$(p="${line%% *}"; echo "${p//\//_}")"
  if [ "$(cat "$name.rc" 2>/dev/null || echo missing)" != 0 ]; then failed=1; fi
done
if [ "$failed" -ne 0 ]; then
  echo FAIL
  exit 1
fi
