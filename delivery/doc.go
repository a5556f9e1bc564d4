// Package delivery is the engine of the Release resource (clusterregistry/v1alpha1): it renders
// a Release's objects (Render), applies them to each member of its placement decision with
// server-side apply under its own field manager, learns their health (kstatus) and any drift from
// watch caches of what it applied on each member (package fleetcache), rolls a new revision out in
// waves gated on health observed after the apply, prunes what a revision no longer has, removes
// everything from a member that leaves the decision, and reports it all in Release.status and in
// ReleaseStatusSlices of at most 100 members. No agent runs on members.
//
// The Controller runs it for every Release of a registry's cluster sets; package controllers
// hosts it (`clusterregistry controllers --controllers releases`).
//
// What a Release's writer may do: a Release reaches only the members of its own namespace (its
// cluster set), through the credentials that the Controller's Resolver follows from their
// Clusters. Whoever may create Releases in a cluster set therefore acts on its members with the
// power of those members' accounts; the shipped roles give that right to the set's editors, not to
// its viewers. An object already on a member that another Release applied, or that carries no
// Release's labels, is not taken over: it is reported as a Conflict.
//
// The Controller is controller-runtime's controller of the Releases (Reconcile), its queue fed by
// the registry's informers, the members' watches and the Fleet. ControllerOptions.Lease elects,
// with election.Run, per cluster set and not per process: two releases controllers of one set,
// however they are hosted (a Manager each, one of every set beside one of that set), meet on
// the set's own Lease, which no Manager's election provides.
package delivery
