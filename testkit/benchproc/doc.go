// Package benchproc runs a sub-benchmark in a process of its own, so that what it measures of the
// process (the live heap, goroutines, CPU) is its own. In one process, what an earlier variant
// leaves behind is counted in, or against, the next: client-go keeps a process-wide cache of
// transports (and so of idle connections) keyed by TLS config, and a heap that grew for one
// variant is reused by the next. The same peer measured 283 KiB per member after other variants
// and 352 KiB in a process of its own.
//
// The test binary is run again with only that sub-benchmark; the child's metrics are reported as
// the parent's, so that `go test -bench` and hack/bench.sh print them as before.
package benchproc
