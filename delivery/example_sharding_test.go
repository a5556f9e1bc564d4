package delivery_test

import (
	"context"
	"log"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/shard"
)

// Replicas of a tool's releases controller divide the members of cluster set "fleet" between
// them: each joins the shard group with a Lease, follows the members it owns through a View of
// its Fleet, and applies each Release to those alone; NewSharding tells it who owns the rest, so
// that it judges the rollout's waves from every replica's reports.
func ExampleNewSharding() {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatal(err)
	}
	registry, kube := versioned.NewForConfigOrDie(cfg), kubernetes.NewForConfigOrDie(cfg)
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kube)})
	if err != nil {
		log.Fatal(err)
	}
	fleet := multicluster.NewFleet(registry, resolver, multicluster.FleetOptions{Namespaces: []string{"fleet"}})
	peers, err := shard.NewPeers(kube.CoordinationV1(), shard.PeerOptions{Namespace: "fleet", Group: "releases"})
	if err != nil {
		log.Fatal(err)
	}
	view := shard.NewView(fleet, peers)
	ctrl, err := delivery.NewController(view, registry, kube, cpversioned.NewForConfigOrDie(cfg), delivery.ControllerOptions{
		Namespace: "fleet",
		Sharding:  delivery.NewSharding(peers, fleet),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := fleet.Start(ctx); err != nil {
		log.Fatal(err)
	}
	go func() { _ = peers.Run(ctx) }()
	go func() { _ = view.Run(ctx) }()
	log.Fatal(ctrl.Run(ctx))
}
