package scheduler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/placement"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// setCPU writes name's status.resources as a capacity controller would: cpu allocatable and
// requested, observed now.
func setCPU(t *testing.T, clusters crv1alpha1.ClusterInterface, name, allocatable, requested string) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := clusters.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Status.Resources = &v1alpha1.ClusterResources{Nodes: 1, ReadyNodes: 1,
			Allocatable:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocatable)},
			Requested:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(requested)},
			LargestFree:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocatable)},
			LastObservedTime: metav1.Now()}
		_, err = clusters.UpdateStatus(t.Context(), c, metav1.UpdateOptions{})
		return err
	}))
}

// decisions records the Scheduler's decisions, for a test to wait on one.
type decisionLog struct {
	mu   sync.Mutex
	last map[string]placement.Decision
}

func (l *decisionLog) decided(p scheduler.Placement, d placement.Decision) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[p.Key.Name] = d
}

// waitExplained waits until the last decision of name explains member as ok says, and returns
// that explanation.
func (l *decisionLog) waitExplained(t *testing.T, name, member string, ok func(placement.Explanation) bool, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, e := range l.last[name].Explanations {
			if e.Cluster.Name == member && ok(e) {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "%s's decision explaining %s: %s", name, member, what)
}

func saying(want string) func(placement.Explanation) bool {
	return func(e placement.Explanation) bool { return strings.Contains(e.Message, want) }
}

func scored(score float64) func(placement.Explanation) bool {
	return func(e placement.Explanation) bool { return e.Score != nil && *e.Score == score }
}

// fitAndPreferSet is a cluster set of five Clusters with cpu figures (a 16 free, b 12, c 4, d 2,
// e none) and a placements Controller running on it until the test ends.
type fitAndPreferSet struct {
	clusters   crv1alpha1.ClusterInterface
	placements crv1alpha1.PlacementInterface
	log        *decisionLog
	chosen     func(name string) []string
}

func startFitAndPrefer(t *testing.T) fitAndPreferSet {
	ctx := t.Context()
	ns := fleettest.NewSet(t, lf)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	clusters := registry.ClusterregistryV1alpha1().Clusters(ns)
	for _, m := range []struct{ name, allocatable, requested string }{
		{"a", "16", "0"}, {"b", "16", "4"}, {"c", "16", "12"}, {"d", "2", "0"}, {"e", "", ""}} {
		addReadyCluster(t, clusters, m.name, "prod")
		if m.allocatable != "" {
			setCPU(t, clusters, m.name, m.allocatable, m.requested)
		}
	}
	fleet := multicluster.NewFleet(registry, nil, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	t.Cleanup(fleet.Stop)
	decisions := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	log := &decisionLog{last: map[string]placement.Decision{}}
	ctrl, err := scheduler.NewController(fleet, registry, decisions, scheduler.ControllerOptions{
		Options: scheduler.Options{SchedulerName: "clusterregistry", Decided: log.decided}, Namespace: ns})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	return fitAndPreferSet{clusters: clusters, placements: registry.ClusterregistryV1alpha1().Placements(ns), log: log,
		chosen: func(name string) []string {
			return chosenSorted(t, decisions, types.NamespacedName{Namespace: ns, Name: name})
		}}
}

// On a real registry: fit chooses only members with room, prefer orders them, a member without
// figures is counted and said; filling a chosen member moves nothing; under rebalance a member
// gives way to a better one, once per cooldown, and the time is in status, written once.
func TestPlacementFitAndPrefer(t *testing.T) {
	realservers.Required(t)
	leaks := append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, leaks...) }) // after the set's own cleanups
	ctx := t.Context()
	set := startFitAndPrefer(t)
	clusters, placements, log := set.clusters, set.placements, set.log
	chosen := set.chosen
	prefer := []v1alpha1.PlacementPreference{{Weight: 1, CEL: `cluster.resources.free["cpu"]`}}

	_, err := placements.Create(ctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "fit"}, Spec: v1alpha1.PlacementSpec{
		Count: ptr.To[int32](3), Fit: &v1alpha1.PlacementFit{Total: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}, Prefer: prefer}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p := waitPlacementStatus(t, placements, "fit", func(p *v1alpha1.Placement) bool { return p.Status.ObservedGeneration == 1 }, "decided")
	require.Equal(t, []string{"a", "b"}, chosen("fit"))
	require.Equal(t, []v1alpha1.PlacementReasonCount{{Reason: "Chosen", Count: 2}, {Reason: "DoesNotFit", Count: 2}, {Reason: "ResourcesUnknown", Count: 1}}, p.Status.Candidates)
	sat := placementCondition(p, v1alpha1.PlacementSatisfied)
	require.Equal(t, metav1.ConditionFalse, sat.Status)
	require.Contains(t, sat.Message, "run a capacity controller (clusterregistry controllers --controllers capacity)")
	require.Equal(t, []v1alpha1.PlacementScore{{Cluster: "a", Score: "16", Reason: "Chosen"}, {Cluster: "b", Score: "12", Reason: "Chosen"}}, p.Status.Scores,
		"status.scores: the chosen, the highest first (c and d do not fit, e has no figures: none is scored)")

	_, err = placements.Create(ctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "best"}, Spec: v1alpha1.PlacementSpec{
		Count: ptr.To[int32](1), Prefer: prefer, Rebalance: &v1alpha1.PlacementRebalance{CooldownSeconds: ptr.To[int64](60)}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p = waitPlacementStatus(t, placements, "best", func(p *v1alpha1.Placement) bool { return p.Status.ObservedGeneration == 1 }, "decided")
	require.Equal(t, []string{"a"}, chosen("best"))
	require.Nil(t, p.Status.LastRebalanceTime, "a first decision moves no one")
	require.Equal(t, []v1alpha1.PlacementScore{{Cluster: "a", Score: "16", Reason: "Chosen"},
		{Cluster: "b", Score: "12", Reason: "OverCount"}, {Cluster: "c", Score: "4", Reason: "OverCount"}, {Cluster: "d", Score: "2", Reason: "OverCount"}}, p.Status.Scores,
		"status.scores: the chosen, then the best left out, each with its reason")

	// a fills up: fit keeps it (its allocatable still holds 6 cpu); best, under rebalance, moves
	// to b and says when.
	setCPU(t, clusters, "a", "16", "16")
	log.waitExplained(t, "fit", "a", saying("chosen before, and still fits; score 0"), "kept, filled")
	require.Equal(t, []string{"a", "b"}, chosen("fit"))
	p = waitPlacementStatus(t, placements, "best", func(p *v1alpha1.Placement) bool { return p.Status.LastRebalanceTime != nil }, "rebalanced")
	require.Equal(t, []string{"b"}, chosen("best"))
	require.Contains(t, p.Status.Candidates, v1alpha1.PlacementReasonCount{Reason: "Rebalanced", Count: 1})
	require.Equal(t, []v1alpha1.PlacementScore{{Cluster: "b", Score: "12", Reason: "Chosen"},
		{Cluster: "c", Score: "4", Reason: "OverCount"}, {Cluster: "d", Score: "2", Reason: "OverCount"}, {Cluster: "a", Score: "0", Reason: "Rebalanced"}}, p.Status.Scores,
		"status.scores: a new member, new scores")
	rebalancedAt := p.Status.LastRebalanceTime
	// fit kept a and b, so its scores are those it chose them by: a's 16, though a is now full.
	p, err = placements.Get(ctx, "fit", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []v1alpha1.PlacementScore{{Cluster: "a", Score: "16", Reason: "Chosen"}, {Cluster: "b", Score: "12", Reason: "Chosen"}}, p.Status.Scores,
		"a kept member's score was rewritten as its capacity moved")

	// a empties again, better than b: within the cooldown best stays, and its status settles.
	setCPU(t, clusters, "a", "16", "0")
	log.waitExplained(t, "best", "a", scored(16), "scored 16")
	p = waitPlacementStatus(t, placements, "best", func(p *v1alpha1.Placement) bool {
		return !slicesContainReason(p.Status.Candidates, "Rebalanced")
	}, "a counted over the count, not rebalanced")
	require.Equal(t, []string{"b"}, chosen("best"))
	require.True(t, rebalancedAt.Equal(p.Status.LastRebalanceTime), "lastRebalanceTime moved without a rebalance")
	require.Contains(t, p.Status.Scores, v1alpha1.PlacementScore{Cluster: "a", Score: "0", Reason: "Rebalanced"}, "scores kept while b is chosen")
	settled := p.ResourceVersion
	time.Sleep(500 * time.Millisecond)
	p, err = placements.Get(ctx, "best", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, settled, p.ResourceVersion, "the status was rewritten with nothing changed")
}

func slicesContainReason(counts []v1alpha1.PlacementReasonCount, reason string) bool {
	for _, c := range counts {
		if c.Reason == reason {
			return true
		}
	}
	return false
}
