package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/placement"
)

// figures gives c status.resources observed ago before now: allocatable cpu, requested cpu, and
// the cpu free on its roomiest Node (memory: 64Gi allocatable, none requested).
func figures(c *v1alpha1.Cluster, allocatable, requested, largestFree string, ago time.Duration) *v1alpha1.Cluster {
	c.Status.Resources = &v1alpha1.ClusterResources{Nodes: 3, ReadyNodes: 3,
		Allocatable:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocatable), corev1.ResourceMemory: resource.MustParse("64Gi")},
		Requested:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(requested)},
		LargestFree:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(largestFree), corev1.ResourceMemory: resource.MustParse("20Gi")},
		LastObservedTime: metav1.NewTime(now.Add(-ago)),
	}
	return c
}

func cpu(s string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
}

func messages(d placement.Decision) map[string]string {
	out := map[string]string{}
	for _, e := range d.Explanations {
		out[e.Cluster.Name] = e.Message
	}
	return out
}

// fit chooses only members with the room it asks, in total and on one Node; figures missing or
// too old are a reason of their own, never a silent nothing.
func TestFit(t *testing.T) {
	p := placement.Policy{Fit: &placement.Fit{Total: cpu("4"), PerNode: cpu("1")}, MaxResourceAgeSeconds: ptr.To[int64](600)}
	d := decide(t, p, nil,
		figures(cluster("roomy"), "16", "4", "6", time.Minute),
		figures(cluster("full"), "16", "14", "1", time.Minute),
		figures(cluster("fragmented"), "16", "4", "500m", time.Minute),
		cluster("unmeasured"),
		figures(cluster("stale"), "16", "0", "6", 11*time.Minute),
	)
	require.Equal(t, []string{"roomy"}, chosenNames(d))
	require.Equal(t, map[string]placement.Reason{"roomy": placement.ReasonChosen, "full": placement.ReasonDoesNotFit,
		"fragmented": placement.ReasonDoesNotFit, "unmeasured": placement.ReasonResourcesUnknown, "stale": placement.ReasonResourcesStale}, reasons(d))
	m := messages(d)
	require.Equal(t, "cpu: 4 asked, 2 free", m["full"])
	require.Equal(t, "cpu: 1 asked, 500m free on the Node with most", m["fragmented"])
	require.Contains(t, m["unmeasured"], "no status.resources (is a capacity controller running?")
	require.Contains(t, m["stale"], "observed 11m0s ago, more than maxResourceAgeSeconds (10m0s)")
}

// A member chosen before stays while its allocatable holds what fit asks, however full what
// the placement sends it makes it; it leaves when its Nodes no longer hold it. Figures that grow
// old keep it, saying so.
func TestFitKeepsAChosenMember(t *testing.T) {
	p := placement.Policy{Fit: &placement.Fit{Total: cpu("4")}, Count: ptr.To[int32](1)}
	first := decide(t, p, nil, figures(cluster("a"), "8", "0", "4", time.Minute), figures(cluster("b"), "2", "0", "2", time.Minute))
	require.Equal(t, []string{"a"}, chosenNames(first))

	filled := decide(t, p, first.Chosen, figures(cluster("a"), "8", "8", "0", time.Minute), figures(cluster("b"), "8", "0", "8", time.Minute))
	require.Equal(t, []string{"a"}, chosenNames(filled), "a member its own Pods fill stays")
	require.Equal(t, placement.ReasonKept, filled.Chosen[0].Reason)

	stale := decide(t, p, first.Chosen, figures(cluster("a"), "8", "8", "0", time.Hour), figures(cluster("b"), "8", "0", "8", time.Minute))
	require.Equal(t, []string{"a"}, chosenNames(stale))
	require.Contains(t, messages(stale)["a"], "whether it still fits is not known: status.resources observed 1h0m0s ago")

	shrunk := decide(t, p, first.Chosen, figures(cluster("a"), "3", "3", "0", time.Minute), figures(cluster("b"), "8", "0", "8", time.Minute))
	require.Equal(t, []string{"b"}, chosenNames(shrunk), "a member whose Nodes no longer hold fit leaves")
	require.Equal(t, placement.ReasonDoesNotFit, reasons(shrunk)["a"])
	require.Equal(t, "chosen before, and no longer fits: cpu: 4 asked, 3 allocatable", messages(shrunk)["a"])
}

// prefer orders candidates by weighted score, higher first; those it cannot score come after,
// with a reason of their own; every score is explained.
func TestPrefer(t *testing.T) {
	p := placement.Policy{Count: ptr.To[int32](2), Prefer: []placement.Preference{
		{Weight: 10, CEL: `cluster.resources.free["cpu"] / cluster.resources.allocatable["cpu"]`},
		{Weight: 1, CEL: `cluster.labels.?tier.orValue("") == "gold" ? 1 : 0`},
	}}
	candidates := []*v1alpha1.Cluster{
		figures(cluster("half", "tier", "gold"), "16", "8", "4", time.Minute), // 10*0.5 + 1 = 6
		figures(cluster("empty"), "16", "0", "8", time.Minute),                // 10
		figures(cluster("busy"), "16", "12", "2", time.Minute),                // 2.5
		cluster("unmeasured"),
	}
	d := decide(t, p, nil, candidates...)
	require.Equal(t, []string{"empty", "half"}, chosenNames(d))
	require.Equal(t, placement.ReasonOverCount, reasons(d)["busy"])
	require.Equal(t, placement.ReasonResourcesUnknown, reasons(d)["unmeasured"])
	require.Contains(t, messages(d)["unmeasured"], "not scored: no status.resources")
	require.Contains(t, messages(d)["half"], "score 6")
	scores := map[string]float64{}
	for _, e := range d.Explanations {
		if e.Score != nil {
			scores[e.Cluster.Name] = *e.Score
		}
	}
	require.Equal(t, map[string]float64{"half": 6, "empty": 10, "busy": 2.5}, scores)

	// Unscored members are chosen when the scored ones do not fill the count.
	wide := decide(t, placement.Policy{Count: ptr.To[int32](4), Prefer: p.Prefer}, nil, candidates...)
	require.Equal(t, []string{"empty", "half", "busy", "unmeasured"}, chosenNames(wide))

	// An expression that fails on a member whose figures are fresh: Unscored, with the error.
	bad := decide(t, placement.Policy{Count: ptr.To[int32](1), Prefer: []placement.Preference{{CEL: `int(cluster.labels["rank"])`}}},
		nil, cluster("ranked", "rank", "3"), cluster("unranked"))
	require.Equal(t, []string{"ranked"}, chosenNames(bad))
	require.Equal(t, placement.ReasonUnscored, reasons(bad)["unranked"])
	require.Contains(t, messages(bad)["unranked"], "prefer[0] could not be evaluated")
}

// Equal scores break ties the same way every time, by the placement's own order of members.
func TestPreferTiesAreDeterministic(t *testing.T) {
	p := placement.Policy{Count: ptr.To[int32](3), Prefer: []placement.Preference{{CEL: `1`}}}
	var candidates []*v1alpha1.Cluster
	for i := range 12 {
		candidates = append(candidates, cluster(fmt.Sprintf("member-%02d", i)))
	}
	first := decide(t, p, nil, candidates...)
	for range 5 {
		shuffled := append([]*v1alpha1.Cluster(nil), candidates...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		require.Equal(t, chosenNames(first), chosenNames(decide(t, p, nil, shuffled...)))
	}
}

// The CEL filter sees resources while they are fresh, and properties.
func TestCELSeesResourcesAndProperties(t *testing.T) {
	withProperty := cluster("edge", "tier", "gold")
	withProperty.Status.Properties = []v1alpha1.ClusterStatusProperty{{Name: "site.example.com", Value: "edge-7"}}
	p := placement.Policy{CEL: `cluster.properties["site.example.com"].startsWith("edge") || (has(cluster.resources) && cluster.resources.free["cpu"] >= 4.0)`}
	d := decide(t, p, nil, withProperty,
		figures(cluster("roomy"), "8", "2", "6", time.Minute),
		figures(cluster("full"), "8", "6", "2", time.Minute),
		figures(cluster("stale"), "8", "0", "8", time.Hour))
	require.Equal(t, []string{"edge", "roomy"}, chosenNames(d))
	require.Equal(t, placement.ReasonCEL, reasons(d)["stale"])
}

// Without rebalance a chosen member stays whatever its score; with it, it gives way to a better
// one once the cooldown has passed, winning ties, and a cooldown that holds a move says when it
// ends.
func TestRebalance(t *testing.T) {
	prefer := []placement.Preference{{CEL: `cluster.resources.free["cpu"]`}}
	members := func(aFree string) []*v1alpha1.Cluster {
		return []*v1alpha1.Cluster{figures(cluster("a"), "16", aFree, "1", time.Minute), figures(cluster("b"), "16", "8", "8", time.Minute)}
	}
	p := placement.Policy{Count: ptr.To[int32](1), Prefer: prefer}
	first := decide(t, p, nil, members("0")...)
	require.Equal(t, []string{"a"}, chosenNames(first))
	require.Equal(t, []string{"a"}, chosenNames(decide(t, p, first.Chosen, members("15")...)), "no rebalance: a stays")

	p.Rebalance = &placement.Rebalance{CooldownSeconds: ptr.To[int64](600)}
	c, err := placement.Compile(p)
	require.NoError(t, err)
	tie := c.Decide(placement.Input{Key: "fleet/web", Candidates: members("8"), Previous: first.Chosen, Now: now})
	require.Equal(t, []string{"a"}, chosenNames(tie), "a tie keeps the member chosen before")
	require.False(t, tie.Rebalanced)

	held := c.Decide(placement.Input{Key: "fleet/web", Candidates: members("15"), Previous: first.Chosen, Now: now, LastRebalance: now.Add(-time.Minute)})
	require.Equal(t, []string{"a"}, chosenNames(held), "within the cooldown")
	require.Equal(t, now.Add(9*time.Minute), held.RecheckAt)

	moved := c.Decide(placement.Input{Key: "fleet/web", Candidates: members("15"), Previous: first.Chosen, Now: now, LastRebalance: now.Add(-11 * time.Minute)})
	require.Equal(t, []string{"b"}, chosenNames(moved))
	require.True(t, moved.Rebalanced)
	require.Equal(t, placement.ReasonRebalanced, reasons(moved)["a"])
	require.Contains(t, messages(moved)["a"], "gave way, by rebalance, to candidates of higher score (its score 1)")

	// A member whose figures are stale is not moved by a rebalance: whether it should be is not known.
	stale := []*v1alpha1.Cluster{figures(cluster("a"), "16", "15", "1", time.Hour), figures(cluster("b"), "16", "8", "8", time.Minute)}
	kept := c.Decide(placement.Input{Key: "fleet/web", Candidates: stale, Previous: first.Chosen, Now: now})
	require.Equal(t, []string{"a"}, chosenNames(kept))
	require.False(t, kept.Rebalanced)
}

func TestFitAndPreferBadPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy placement.Policy
		want   string
	}{
		{placement.Policy{Fit: &placement.Fit{Total: cpu("-1")}}, "fit.total.cpu: -1 is negative"},
		{placement.Policy{Prefer: []placement.Preference{{CEL: `"high"`}}}, "prefer[0].cel: the expression is string, want double"},
		{placement.Policy{Prefer: []placement.Preference{{CEL: `1`, Weight: 101}}}, "prefer[0].weight: 101, want 0 to 100"},
		{placement.Policy{Rebalance: &placement.Rebalance{}}, "rebalance: needs prefer"},
		{placement.Policy{Prefer: []placement.Preference{{CEL: `1`}}, Rebalance: &placement.Rebalance{CooldownSeconds: ptr.To[int64](5)}}, "rebalance.cooldownSeconds: 5, want 60 or more"},
		{placement.Policy{MaxResourceAgeSeconds: ptr.To[int64](0)}, "maxResourceAgeSeconds: 0, want 1 or more"},
	} {
		_, err := placement.Compile(tc.policy)
		require.ErrorContains(t, err, tc.want)
	}
}

// Property: under random capacity changes (Pods coming and going, Nodes added and lost), a
// member chosen before is never moved while its allocatable holds fit, a new member is chosen
// only with the room fit asks, and the count is filled whenever enough members fit.
func TestFitAndPreferDoNotChurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 77))
	p := placement.Policy{Count: ptr.To[int32](3), Fit: &placement.Fit{Total: cpu("2")},
		Prefer: []placement.Preference{{CEL: `cluster.resources.free["cpu"]`}}}
	c, err := placement.Compile(p)
	require.NoError(t, err)
	alloc := map[string]int{}
	req := map[string]int{}
	var previous []placement.Choice
	for round := range 2000 {
		var candidates []*v1alpha1.Cluster
		for i := range 8 {
			name := fmt.Sprintf("m%d", i)
			if round == 0 || rng.IntN(10) == 0 { // a Node added or lost
				alloc[name] = []int{1, 2, 4, 8, 16}[rng.IntN(5)]
			}
			req[name] = min(max(req[name]+rng.IntN(5)-2, 0), alloc[name]) // Pods come and go
			candidates = append(candidates, figures(cluster(name), fmt.Sprint(alloc[name]), fmt.Sprint(req[name]), "1", time.Minute))
		}
		d := c.Decide(placement.Input{Key: "fleet/web", Candidates: candidates, Previous: previous, Now: now})
		chosen := map[string]bool{}
		for _, ch := range d.Chosen {
			chosen[ch.Cluster.Name] = true
		}
		fitting := 0
		for _, ch := range previous {
			if alloc[ch.Cluster.Name] >= 2 {
				require.True(t, chosen[ch.Cluster.Name], "round %d: %s moved while its allocatable (%d) holds fit", round, ch.Cluster.Name, alloc[ch.Cluster.Name])
			}
		}
		was := map[string]bool{}
		for _, ch := range previous {
			was[ch.Cluster.Name] = true
		}
		for name := range alloc {
			if !was[name] && alloc[name]-req[name] >= 2 || was[name] && alloc[name] >= 2 {
				fitting++
			}
		}
		for name := range chosen {
			if !was[name] {
				require.GreaterOrEqual(t, alloc[name]-req[name], 2, "round %d: %s chosen without room", round, name)
			}
		}
		require.Equal(t, min(fitting, 3), len(d.Chosen), "round %d: the count filled as far as members fit", round)
		previous = d.Chosen
	}
}
