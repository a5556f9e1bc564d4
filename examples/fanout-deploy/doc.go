// Command fanout-deploy applies a Deployment, or any manifests (-f), to every member cluster that a
// cluster registry selects, all at once, and reports what happened on each. It is the Cluster Registry SDK's demo
// client, and is meant to be read: a registry client, a Resolver that follows each Cluster's
// credential pointers, a Fleet, and one multicluster.Map.
//
//	fanout-deploy -n fleet -l env=prod --name web --image nginx:1.27 --replicas 2
//	fanout-deploy -n fleet --name web --delete
//	fanout-deploy -n fleet -l env=prod -f ./app/ --wait
//
// It takes kubectl's connection flags for the registry (--kubeconfig, --context, -n, --as, ...,
// from k8s.io/cli-runtime). It prints a line per member as each finishes, then a table, then each
// failed member's full error. It exits 0 when the change was made on every member (or skipped
// with --skip-not-ready), 1 when it was not: the last line names the members where it failed and,
// apart from them, those it never started on (after a failed --canary); 2 for bad flags.
package main
