#!/usr/bin/env bash
# Version skew, tested: the Kubernetes versions RELEASE.md says the SDK supports, beyond the newest
# one that every test runs against (hack/build-testbins.sh's default).
#
#  1. The oldest supported Kubernetes as the registry and as every member, with its own kubectl:
#     the CRD and its CEL rules, kubectl's columns, explain and refusals, the Resolver, fan-out,
#     the health controller and the clusterregistry command (credential plugin included).
#  2. The oldest supported kubectl (two minors below the newest) against the newest API server:
#     the kubectl tests, the command's kubectl paths and the README's kubectl steps.
#
# Each version is built once from the Go module proxy, like the newest, and cached by version; of
# the older kubectl's release only kubectl is built.
# Tests run with the race detector, as hack/test.sh runs them on the newest: then their packages
# are the ones that run compiled, and a fresh cache compiles each once, not a second time without
# -race for this pass alone (every dependency of its six packages, on the same two cores as the
# tests). Like hack/test.sh, this runs go test through hack/gotest.sh, which keeps the linked test
# binaries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OLDEST="${OLDEST_KUBE_VERSION:-v1.32.13}"
OLDEST_KUBECTL="${OLDEST_KUBECTL_VERSION:-v1.34.4}"
CACHE_ROOT="${CLUSTER_REGISTRY_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-registry-sdk}"

newest="$(hack/build-testbins.sh | tail -n 1)"
# Its members run no workloads (no test of the skew pass asks for them), and its
# kube-controller-manager does not build from the module proxy (a staging module of that release
# was never published there).
oldest="$(KUBE_VERSION="$OLDEST" hack/build-testbins.sh --servers-only | tail -n 1)"
older_kubectl="$(KUBE_VERSION="$OLDEST_KUBECTL" hack/build-testbins.sh --kubectl-only | tail -n 1)"
mixed="$CACHE_ROOT/assets/newest-apiserver-kubectl-$OLDEST_KUBECTL"
mkdir -p "$mixed"
ln -sf "$(readlink -f "$newest/kube-apiserver")" "$mixed/kube-apiserver"
ln -sf "$(readlink -f "$newest/etcd")" "$mixed/etcd"
ln -sf "$(readlink -f "$older_kubectl/kubectl")" "$mixed/kubectl"

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

# Tests of the SDK's own clocks and state machines (expiry, failover, reconnecting, retries) ask
# nothing of the API server that the other tests of their packages do not ask too: they run once,
# in hack/test.sh, not again here (about 100 s of the oldest pass). A test that needs the oldest
# server stays out of this list.
clock_tests='^(TestControllersShardedFailover|TestLeaderElectionFailover|TestKeepConnectionsSeesAReinstalledCluster|TestCredentialsExpiringAndExpired|TestRotatedSecretIsPickedUp|TestExecPluginHonoursExpiry|TestFleetFreshnessAcrossARegistryRestart|TestMapRetriesWhatIsSafeToRetry)$'
# Tests whose members run workloads cannot run at the oldest release: its kube-controller-manager
# does not build from the module proxy (above). They run in hack/test.sh, on the newest.
workload_tests='^(TestDeliverySurvivesChurn)$'
echo "== registry, members and kubectl at Kubernetes $OLDEST"
KUBEBUILDER_ASSETS="$oldest" hack/gotest.sh -race -count=1 -timeout=30m -vet=off -skip "$clock_tests|$workload_tests" ./clusterregistry/ ./access/ ./multicluster/ ./health/ ./cmd/clusterregistry/

# Only the tests that run kubectl: the others would repeat hack/test.sh's run on the same server.
# A new test that runs kubectl joins this list (TestKubectl* and *Steps* join by their names).
kubectl_tests='^(TestKubectl.*|TestKubeconfigThroughRegistry|TestJoinExec|TestInstall|TestUpgradeFromLastRelease|TestControllersDeployment|Test.*Steps.*)$'
# Every test in those packages that runs kubectl (through a fleet's Kubectl or a kubectl helper)
# must be in the list.
missing="$(awk '/^func / { name = ($2 ~ /^Test/) ? $2 : ""; sub(/\(.*/, "", name) }
  !/^[[:space:]]*\/\// && /[Kk]ubectl\(|\.Kubectl[,) ]/ && name != "" { print name }' \
  clusterregistry/*_test.go cmd/clusterregistry/*_test.go internal/readme/*_test.go |
  sort -u | grep -Ev "$kubectl_tests" || true)"
if [ -n "$missing" ]; then
  echo "verify-skew: these tests run kubectl but are not in kubectl_tests: $missing" >&2
  exit 1
fi
echo "== kubectl $OLDEST_KUBECTL against the newest API server"
KUBEBUILDER_ASSETS="$mixed" hack/gotest.sh -race -count=1 -timeout=30m -vet=off -run "$kubectl_tests" ./clusterregistry/ ./cmd/clusterregistry/ ./internal/readme/
