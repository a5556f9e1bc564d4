// Package election runs work only while this replica holds a Lease in the registry, so that
// replicas of a controller take turns instead of acting at once. The health controller, the
// credential rotator and any controller of a tool's own share its one type, Lease:
//
//	err := election.Run(ctx, kube.CoordinationV1(), election.Lease{Namespace: "fleet-system", Name: "my-controller"},
//		logger, func(ctx context.Context) error { return work(ctx) })
//	if errors.Is(err, election.ErrLostLeadership) { ... } // another replica leads now
//
// To divide a fleet's members among replicas instead of electing one, see package shard.
package election
