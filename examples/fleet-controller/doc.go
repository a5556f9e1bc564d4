// Command fleet-controller is a multicluster-runtime controller over a cluster registry: with
// package mcprovider, a controller written with mcbuilder reconciles on every member of a
// cluster set, including members that join while it runs, and stops on members that leave.
//
// It keeps one object per cluster set on every member: the ConfigMap
// kube-public/cluster-registry-membership-SET, which tells whoever reads the member which registry
// entry it is in that set (cluster set, name, display name). Deleted or edited, it is put back; an
// object that something else keeps changing back is left alone for a minute, and the controller
// logs why (a member in the registry twice under two names of one set, for example).
//
//	fleet-controller -n fleet
//
// The registry is reached with kubectl's connection flags (--kubeconfig, --context, -n, ...), the
// members with the credentials their Clusters point to, within the trust flags (--allow-exec,
// --file-root, ...).
package main
