package controllers

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/cluster-registry/sdk/internal/metricsreg"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/shard"
)

// sharding is a sharded replica's part: its membership of the group, its view of the Fleet, and
// what says how the members are divided (metrics, the handoff log).
type sharding struct {
	peers    *shard.Peers
	view     *shard.View
	handoffs *handoffLog
	metrics  prometheus.Registerer
}

// start registers the shard metrics (replacing an earlier run's in the process) and runs the
// group's membership, the view and the handoff log in g.
func (s *sharding) start(ctx context.Context, g *errgroup.Group) error {
	moves := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clusterregistry_shard_member_moves_total",
		Help: "Members this replica took (in) or gave up (out) as the fleet and the replicas changed.",
	}, []string{"direction"})
	if s.metrics != nil {
		if err := metricsreg.Replace(s.metrics,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "clusterregistry_shard_owned_members", Help: "Members this replica owns."},
				func() float64 { return float64(len(s.view.Members())) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "clusterregistry_shard_peers", Help: "Live replicas of the group, as this replica sees them."},
				func() float64 { return float64(len(s.peers.Live())) }),
			moves,
		); err != nil {
			return err
		}
	}
	unsubscribe := s.view.Subscribe(func(ev multicluster.MemberEvent) {
		s.handoffs.observe(ev)
		switch ev.Type {
		case multicluster.MemberAdded:
			moves.WithLabelValues("in").Inc()
		case multicluster.MemberRemoved:
			moves.WithLabelValues("out").Inc()
		}
	})
	g.Go(func() error { return s.peers.Run(ctx) })
	g.Go(func() error { return s.view.Run(ctx) })
	g.Go(func() error {
		defer unsubscribe()
		return s.handoffs.run(ctx)
	})
	return nil
}
