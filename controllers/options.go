package controllers

import (
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/shard"
)

// The controllers' names, as ControllerError and Host.Controllers give them, in the order they
// start.
const (
	Health          = "health"
	Rotation        = "rotation"
	ClusterProfiles = "clusterprofiles"
	Placements      = "placements"
	Releases        = "releases"
	Capacity        = "capacity"
)

// Options say which controllers a Host runs, over which members of which registry. Each
// controller's options are its package's; the Host fills in what its controllers share (the
// registry's clients, the Resolver, the members, the Logger, the metrics registry) and leaves
// leader election to the Manager, so those fields are ignored there.
type Options struct {
	// Config reaches the registry. Required.
	Config *rest.Config
	// Resolver turns Clusters into member clients, for every controller. Required.
	Resolver *access.Resolver
	// Namespaces are the cluster sets the controllers work on; every one when empty.
	Namespaces []string
	// Selector keeps only the Clusters whose labels match; all when nil.
	Selector labels.Selector

	// Health, if set, probes every member and keeps its Cluster's status.
	Health *health.Options
	// Rotation, if set, renews join's tokens before they expire.
	Rotation *rotation.Options
	// ClusterProfiles, if set, publishes each Cluster as a ClusterProfile; the registry must
	// serve them (New refuses otherwise).
	ClusterProfiles *clusterprofile.PublishOptions
	// Placements, if set, decides the Placements of Namespaces (the first, or every one when
	// empty) and writes their PlacementDecisions; the registry must serve both (New refuses
	// otherwise). Its Fresh and, with Shard, Owns are the Host's.
	Placements *scheduler.ControllerOptions
	// Releases, if set, delivers the Releases of Namespaces (the first, or every one when empty)
	// to the members of their decisions (package delivery); the registry must serve
	// PlacementDecisions (New refuses otherwise). Its Fresh is the Host's; with Shard, its
	// Sharding is the Host's too: each replica applies to the members it owns.
	Releases *delivery.ControllerOptions
	// Capacity, if set, keeps each member's Cluster status.resources (package capacity): its
	// Nodes, what they hold and what its Pods request. Its Registry and Members are the Host's.
	Capacity *capacity.Options

	// Shard, if set, makes this replica one of a group that divides the members among itself
	// (package shard): the controllers then run on every replica, each on the members it owns,
	// and placements on the Placements it owns. Without it they run on the Manager's leader.
	Shard *shard.PeerOptions
	// WatchOwned, with Shard, makes each replica watch only the Clusters it owns
	// (shard.NewBucketView: the buckets it owns, and the Clusters in no bucket), rather than
	// follow every Cluster and drop the others': the replicas of a group then receive each
	// status write once between them, not once each. The Host then has no Fleet of every member
	// (Fleet is nil), so New refuses it with Placements or Releases, which weigh every member:
	// run those in a Deployment of their own.
	WatchOwned bool

	// Logger logs what the host and its controllers do; each controller's is named after it.
	// Default: discard.
	Logger logr.Logger
	// Metrics receives the controllers' and the shard's metrics; nil leaves them unregistered.
	// clusterregistry controllers gives controller-runtime's registry, which the Manager serves.
	Metrics prometheus.Registerer
}
