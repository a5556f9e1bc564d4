// Package controllers hosts the SDK's controllers (health, rotation, ClusterProfiles, placements)
// in a controller-runtime Manager, on one Fleet: one watch of the registry's Clusters, shared
// member clients, one leader election (the Manager's) or replicas that divide the members
// (package shard), and one readiness check. It is what `clusterregistry controllers` runs, for a
// tool that runs its own Manager and wants the SDK's controllers beside its own:
//
//	host, err := controllers.New(controllers.Options{
//		Config:   cfg,
//		Resolver: resolver,
//		Health:   &health.Options{},
//	})
//	...
//	err = host.AddToManager(mgr) // then mgr.Start(ctx)
//
// The Fleet runs on every replica, leader or not, so that each is ready to take over; the
// controllers run on the leader (the Manager's LeaderElection), or, with Options.Shard, on every
// replica, each on the members it owns.
package controllers
