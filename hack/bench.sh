#!/usr/bin/env bash
# Runs the SDK's benchmarks and prints their figures as a table. Figures are ratios and per-unit
# costs measured in the same run, since these machines are noisy. Takes a few minutes.
#   BenchmarkResolveCached    cached Resolve of an unchanged Cluster (target < 1µs, 0 allocs)
#   BenchmarkFanOut           one GET on N simulated members of 50ms latency, beside the hand-rolled
#                             peer (a clientset per member, errgroup); each N of each in a process
#                             of its own (testkit/benchproc), and paired/: both in turn in one
#                             process, their CPU ratio
#   BenchmarkHealth           the health controller over 10,000 simulated members in a real
#                             registry: CPU per probe and per status write apart, heap per member,
#                             writes at steady state
#                             and in an outage of 10% (takes about 3 minutes)
#   BenchmarkFleet            a Fleet of 10,000 Clusters on the real registry, beside client-go's
#                             generated informer: sync, heap per idle member, Members, Select
#   BenchmarkCaches           fleetcache: ConfigMaps on 1,000 simulated members with 100 each,
#                             beside an informer factory per member (the hand-rolled peer): sync,
#                             heap and goroutines per member, write-to-handler latency p50/p99;
#                             also metadata only (sdk-metadata beside a metadata informer factory)
#                             and the connection floor; each variant in a process of its own
#   BenchmarkEngage           mcprovider: a multicluster manager engaging 1,000 simulated members,
#                             beside multicluster-runtime's clusters provider: time to engage all,
#                             heap and goroutines per engaged cluster; each in a process of its own
#   BenchmarkPublish          clusterprofile: ClusterProfiles for 10,000 Clusters of a real registry:
#                             time to first publish, writes per Cluster, writes/s at steady state
#   BenchmarkRotate           rotation: 10,000 simulated members' tokens, in Secrets of a real
#                             registry, all due at once: renewals/s, registry writes/s, CPU per
#                             renewal; then a pass with nothing due (time, registry reads)
#   BenchmarkShardedHealth    shard: health over 10,000 simulated members as one replica, then as
#                             3 replicas of a shard group of bucket views in the same run: members
#                             probed twice or not at all in a steady minute, coordination writes
#                             beside health's, heap per replica over the single one's,
#                             probes/s/core of both, and of a shard group following every Cluster
#                             and two controls: 3 processes on fixed thirds with no shard group,
#                             each watching only its own, and one process on a third alone
#   BenchmarkScheduler        scheduler: 1,000 Placements over 10,000 Clusters of a real registry,
#                             decided by the placements controller: first decisions and statuses, p99 from a chosen member going Unreachable to its
#                             placements' decisions rewritten, writes to unaffected placements,
#                             writes after an unrelated join
#   BenchmarkDelivery         delivery: Releases (manifests, and a chart over 3 regions) to 1,000
#                             simulated members: time to Ready, renders, writes at steady state,
#                             a rollout in waves and a failed one rolled back
#   BenchmarkShardedDelivery  delivery: a Release to 10,000 simulated members by 3 sharded replicas,
#                             each a process: time to Ready (target 60 s), status slices and the
#                             most members in one (target 100 of at most 100), heap per delivery
#   BenchmarkShare            delivery: a sharded replica's bookkeeping of the other replicas'
#                             members in one pass, ns per member at 1,000 and 10,000 (linear: flat)
#   BenchmarkDiffRelease      clusterregistry diff release across 100 members (target 10 s)
#   BenchmarkDecide           delivery: one pass's planning (a pure function) over 10,000 members
#                             in 40 waves midway through a rollout: ns per member
#   BenchmarkHelmMode         helmrelease: Helm's install then upgrade on 1,000 members, 10 at a
#                             time: full discoveries per member (target 1), heap per member, ms
#                             per operation
#   BenchmarkRender           chartrender: a chart that loops through template functions,
#                             rendered with its bounds beside Helm's own template action, in turn:
#                             time per render of each, their ratio
#   BenchmarkTunnel           tunnel: fan-out over 100 and probes over 1,000 simulated members
#                             through a tunnel server and konnectivity agents, beside the same
#                             members dialled directly, in turn: the ratios, the server's CPU per
#                             probe and heap per connected member
#   BenchmarkMemberWithWorkloads localfleet: a member that runs workloads (kube-controller-manager,
#                             kube-scheduler, KWOK with 3 Nodes): the workload processes' CPU idle
#                             and per rollout of a new image to 10 replicas, and their memory,
#                             beside an API server with its etcd (a member without workloads)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBEBUILDER_ASSETS="$(hack/build-testbins.sh)" # the package's TestMain starts a test registry
export KUBEBUILDER_ASSETS

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
go test ./localfleet/ -run '^$' -bench 'MemberWithWorkloads' -benchtime 5x | tee -a "$out" >&2
go test ./access/ -run '^$' -bench 'ResolveCached' -benchtime 200000x | tee -a "$out" >&2
# go test splits a -bench pattern at each slash outside parentheses, one part per level of names:
# paired/... must be an alternative of its own, or "paired" is matched against the whole group.
go test ./multicluster/ -run '^$' -bench 'FanOut/(members|peer-members)=(10|100|1000)$|FanOut/paired/members=(10|100|1000)$' -benchtime 100x | tee -a "$out" >&2
go test ./multicluster/ -run '^$' -bench 'FanOut/(members|peer-members)=3000$|FanOut/paired/members=3000$' -benchtime 20x | tee -a "$out" >&2
go test ./multicluster/ -run '^$' -bench 'Fleet/(sync|idle-heap)$' -benchtime 3x | tee -a "$out" >&2
go test ./multicluster/ -run '^$' -bench 'Fleet/Members$' -benchtime 100000x | tee -a "$out" >&2
go test ./multicluster/ -run '^$' -bench 'Fleet/Select$' -benchtime 200x | tee -a "$out" >&2
go test ./multicluster/ -run '^$' -bench 'FanOut/naive' -benchtime 3x | tee -a "$out" >&2
go test ./fleetcache/ -short -run '^$' -bench 'Caches' -benchtime 1x -count 2 | tee -a "$out" >&2
go test ./mcprovider/ -short -run '^$' -bench 'Engage' -benchtime 1x -timeout 30m | tee -a "$out" >&2
go test ./clusterprofile/ -run '^$' -bench 'Publish' -benchtime 1x -timeout 30m | tee -a "$out" >&2
go test ./rotation/ -run '^$' -bench 'Rotate' -benchtime 1x -timeout 30m | tee -a "$out" >&2
go test ./health/ -run '^$' -bench 'Health' -benchtime 1x -timeout 30m | tee -a "$out" >&2
go test ./capacity/ -run '^$' -bench 'BenchmarkCapacity' -benchtime 1x -timeout 30m | tee -a "$out" >&2
go test ./capacity/ -run '^$' -bench 'Observe' -benchtime 2000x | tee -a "$out" >&2
go test ./shard/ -run '^$' -bench 'ShardedHealth' -benchtime 1x -timeout 30m | tee -a "$out" >&2
go test ./scheduler/ -run '^$' -bench 'Scheduler' -benchtime 1x -timeout 30m | tee -a "$out" >&2
go test ./delivery/ -run '^$' -bench '^Benchmark(Chart)?Delivery$' -benchtime 1x -members 1000 -timeout 30m | tee -a "$out" >&2
go test ./delivery/ -run '^$' -bench 'ShardedDelivery' -benchtime 1x -sharded-members 10000 -timeout 30m | tee -a "$out" >&2
go test ./delivery/ -run '^$' -bench 'Share' -benchtime 200x | tee -a "$out" >&2
go test ./delivery/ -run '^$' -bench 'Decide' -benchtime 20x | tee -a "$out" >&2
go test ./placement/ -run '^$' -bench 'Decide' -benchtime 200x | tee -a "$out" >&2
go test ./cmd/clusterregistry/ -run '^$' -bench 'DiffRelease' -benchtime 1x -timeout 30m | tee -a "$out" >&2
go test ./helmrelease/ -run '^$' -bench 'HelmMode' -benchtime 1x -helm-members 1000 -timeout 30m | tee -a "$out" >&2
go test ./chartrender/ -run '^$' -bench 'Render' -benchtime 20x | tee -a "$out" >&2
go test ./tunnel/ -run '^$' -bench 'Tunnel' -benchtime 10x | tee -a "$out" >&2

# Each result line is: name iterations value unit value unit ...; print one row per benchmark.
awk '
  /^Benchmark/ {
    name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
    row = ""
    for (i = 3; i < NF; i += 2) row = row sprintf("  %s=%s", $(i+1), $i)
    printf "%-28s%s\n", name, row
  }' "$out"
