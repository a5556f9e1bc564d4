// Command clusterregistry runs the Cluster Registry SDK's components against a registry:
//
//	clusterregistry install --create-namespace -n fleet   # make an API server a registry
//	clusterregistry join kind-dev --name dev -n fleet      # register a cluster of your kubeconfig
//	clusterregistry health -n fleet                       # keep every Cluster's status true
//	clusterregistry get -n fleet                          # the fleet at a glance
//	clusterregistry export -n fleet > fleet.yaml          # the cluster set as a flat file
//	clusterregistry import fleet.yaml                     # and back
//
// It takes kubectl's connection flags for the registry (--kubeconfig, --context, -n, --as, ...).
// Installed as kubectl-clusterregistry on $PATH, it is also `kubectl clusterregistry`, and as
// kubectl_complete-clusterregistry it completes that.
//
// Each subcommand is built as kubectl's are: an Options struct whose Complete fills in what the
// flags leave to the environment, Validate checks without servers, and Run does the work, with
// its clients from one factory (factory.go).
//
// Exit status, one rule for every subcommand (README.md, "Exit status"): 2 when the command line
// itself is wrong, which is found before anything is read or reached (an unknown command, flag or
// shell; a wrong number of arguments; a flag value that cannot be right; flags that conflict); 1
// when the command could not do what it was asked (a server refused or did not answer; a context,
// cluster set, Cluster or file it names does not exist; any member or Cluster failed, as import
// and rotate report each); 0 when it did, or was interrupted.
package main
