// Package localfleet starts a cluster registry and member clusters on this machine, for tests and
// demos of multi-cluster tools: real kube-apiservers with etcd, as controller-runtime's envtest
// starts them, with the Cluster CRD installed in the registry and every member registered there
// through the same credential pointers a production fleet uses. Odd-numbered members are reached
// with a service-account token in a Secret pinned to the member's server (provider type secret),
// even-numbered ones with a client-certificate kubeconfig in a Secret (kubeconfig-secret), so a
// tool is exercised on both.
//
// A test starts one fleet (StartForTest stops it when the test ends; Start leaves that to the
// caller, for a TestMain that shares one fleet) and points the tool under test at
// Fleet.Registry:
//
//	fleet := localfleet.StartForTest(t, localfleet.Options{Members: 3})
//	// run the tool with --kubeconfig fleet.Registry.Kubeconfig --namespace fleet.Namespace,
//	// then check fleet.Members[i].Config to see what it did.
//
// By default a member is an API server alone: nothing runs pods, and the ClusterRoles that
// aggregate (view, edit, admin) are filled once, when a server starts, as its aggregation
// controller would fill them; see Server.AggregateClusterRoles. With Options.Workloads, members
// run workloads as clusters do: kube-controller-manager, kube-scheduler and KWOK's simulated
// Nodes, so a Deployment becomes Available through Kubernetes' own controllers, and a Pod of an
// image from UnpullableRegistry waits in ImagePullBackOff for good, as a bad image's would.
//
// With Options.Isolated, a member lives in a network namespace of its own, as an edge cluster
// behind NAT does: nothing on this machine's network can dial it, so a tool reaches it through a
// tunnel (package tunnel) or not at all; Server.Command runs programs in its network and
// Server.Bridge lets them reach an address outside.
//
// The binaries come from BinaryAssetsDirectory, KUBEBUILDER_ASSETS, or the cache that the SDK's
// hack/build-testbins.sh fills; see AssetsDir.
package localfleet
