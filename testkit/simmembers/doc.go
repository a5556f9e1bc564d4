// Package simmembers stands in for thousands of member API servers in the SDK's benchmarks,
// which do not fit on a small machine: TLS servers on their own 127.x.y.z addresses speaking the
// few paths the benchmarks use (readyz, healthz, version, the kube-system namespace, ConfigMaps,
// and a list and watch of 100 ConfigMaps with writes on request, for watch caches), each with
// injected latency. They run in a child process (the test binary, re-executed) so that
// the parent's CPU, heap and goroutine counts hold only the client side.
//
// A package's TestMain calls Main first; a benchmark calls Start.
package simmembers
