// Package replicaproc runs the replicas of a controller in the SDK's benchmarks as processes of
// their own: the test binary run again, told what to run by an environment variable, so that each
// replica's heap and CPU are its own, as in a Deployment, and no replica's leftovers count in
// another's. The parent asks each replica by a line on its input and reads its answer, a JSON
// line, from its output; a replica ends when its input closes.
//
// A package's TestMain calls Main first (as it calls simmembers.Main); a benchmark calls Start.
package replicaproc
