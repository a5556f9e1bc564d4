package health

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Probed is what ProbeOnce found on one member and did with it.
type Probed struct {
	Member types.NamespacedName
	// Condition is the Ready condition the probe decided, damped by the thresholds as Run damps
	// it: a first failure under a FailureThreshold above 1 leaves Ready as it was.
	Condition metav1.Condition
	// Wrote says the status was written: it changed, or its heartbeat was due.
	Wrote bool
	// Err is why writing the status failed; nil when it was written or had no need to be.
	Err error
}

// ProbeOnce probes each member the Options select once, at most Concurrency at a time, writes
// each status that changed, and returns what it found, by cluster set and name: a single pass,
// for a CronJob or a check by hand, where Run goes on. A pass has no history, so a FailureThreshold
// or SuccessThreshold above 1 keeps a change from being written; callers that want a pass's
// findings written give thresholds of 1. It returns an error at once if the registry's Clusters
// cannot be listed. LeaderElection is not used.
func (c *Controller) ProbeOnce(ctx context.Context) ([]Probed, error) {
	w, err := newWriter(ctx, &c.opts)
	if err != nil {
		return nil, err
	}
	c.writer = w
	defer w.shutdown()
	source, stop, err := c.source(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()

	members := source.Members()
	results := make([]Probed, len(members))
	sem := make(chan struct{}, c.opts.Concurrency)
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t := &tracked{member: m, added: time.Now()}
			_, v, wrote, werr, ok := c.probeWrite(ctx, t, time.Now(), false)
			results[i] = Probed{Member: m.Name(), Condition: v.condition, Wrote: wrote, Err: werr}
			if !ok {
				results[i].Err = fmt.Errorf("not probed: %w", context.Cause(ctx))
			}
		})
	}
	wg.Wait()
	c.sweeps.Wait()
	slices.SortFunc(results, func(a, b Probed) int { return strings.Compare(a.Member.String(), b.Member.String()) })
	return results, ctx.Err()
}
