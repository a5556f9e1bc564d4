package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/placement"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// cluster is a Ready Cluster of set "fleet" with labels given as k=v pairs.
func cluster(name string, kv ...string) *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Labels[kv[i]] = kv[i+1]
	}
	c.Status.Version = "v1.36.3"
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReachable,
		LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))})
	return c
}

// notReady makes c's Ready condition False with reason, since the given time before now.
func notReady(c *v1alpha1.Cluster, reason string, since time.Duration) *v1alpha1.Cluster {
	c.Status.Conditions = nil
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason,
		LastTransitionTime: metav1.NewTime(now.Add(-since))})
	return c
}

func decide(t *testing.T, p placement.Policy, previous []placement.Choice, candidates ...*v1alpha1.Cluster) placement.Decision {
	t.Helper()
	c, err := placement.Compile(p)
	require.NoError(t, err)
	return c.Decide(placement.Input{Key: "fleet/web", Candidates: candidates, Previous: previous, Now: now})
}

func chosenNames(d placement.Decision) []string {
	var out []string
	for _, ch := range d.Chosen {
		out = append(out, ch.Cluster.Name)
	}
	return out
}

func reasons(d placement.Decision) map[string]placement.Reason {
	out := map[string]placement.Reason{}
	for _, e := range d.Explanations {
		out[e.Cluster.Name] = e.Reason
	}
	return out
}

// Every candidate gets one primary reason, in or out, and the filters apply in a stated order.
func TestEveryCandidateHasOneReason(t *testing.T) {
	d := decide(t, placement.Policy{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		CEL:      `cluster.labels.?tier.orValue("") != "bronze"`,
		Exclude:  []string{"fleet/banned"},
		Include:  []string{"pet"},
	},
		nil,
		cluster("a", "env", "prod"),
		cluster("dev", "env", "dev"),
		cluster("cheap", "env", "prod", "tier", "bronze"),
		cluster("banned", "env", "prod"),
		cluster("pet", "env", "dev"), // included whatever the selector says
		notReady(cluster("down", "env", "prod"), v1alpha1.ReasonUnreachable, time.Minute),
	)
	require.Equal(t, map[string]placement.Reason{
		"a": placement.ReasonChosen, "dev": placement.ReasonSelector, "cheap": placement.ReasonCEL,
		"banned": placement.ReasonExcluded, "pet": placement.ReasonIncluded, "down": placement.ReasonNotReady,
	}, reasons(d))
	require.Equal(t, []string{"pet", "a"}, chosenNames(d), "included members come first")
	require.Len(t, d.Explanations, 6)
	for _, e := range d.Explanations {
		require.NotEmpty(t, e.Message, e.Cluster.String())
		require.Equal(t, slicesContains(chosenNames(d), e.Cluster.Name), e.Reason.Chosen(), e.Cluster.String())
	}
	require.True(t, d.Satisfied)
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Same inputs, same answer, whatever the order candidates come in; and two placements of one
// count do not all choose the same members.
func TestDeterministic(t *testing.T) {
	var candidates []*v1alpha1.Cluster
	for i := range 50 {
		candidates = append(candidates, cluster(fmt.Sprintf("member-%02d", i)))
	}
	p := placement.Policy{Count: ptr.To[int32](5)}
	c, err := placement.Compile(p)
	require.NoError(t, err)
	first := c.Decide(placement.Input{Key: "fleet/web", Candidates: candidates, Now: now})
	for range 20 {
		shuffled := append([]*v1alpha1.Cluster(nil), candidates...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		require.Equal(t, first, c.Decide(placement.Input{Key: "fleet/web", Candidates: shuffled, Now: now}))
	}
	overlap := 0
	other := c.Decide(placement.Input{Key: "fleet/api", Candidates: candidates, Now: now})
	for _, n := range chosenNames(other) {
		if slicesContains(chosenNames(first), n) {
			overlap++
		}
	}
	require.Less(t, overlap, 5, "two placements chose the very same members")
}

// A chosen member stays chosen while it fits, and new members only fill free room: a join
// changes nothing when the count is met, and a leave is filled by one new member alone.
func TestStickiness(t *testing.T) {
	var candidates []*v1alpha1.Cluster
	for i := range 10 {
		candidates = append(candidates, cluster(fmt.Sprintf("member-%02d", i)))
	}
	p := placement.Policy{Count: ptr.To[int32](3)}
	first := decide(t, p, nil, candidates...)
	require.Len(t, first.Chosen, 3)

	// Members join, in every place of the order: nothing changes.
	joined := append(append([]*v1alpha1.Cluster(nil), candidates...), cluster("aaa"), cluster("member-05b"), cluster("zzz"))
	again := decide(t, p, first.Chosen, joined...)
	require.Equal(t, chosenNames(first), chosenNames(again))
	for _, ch := range again.Chosen {
		require.Equal(t, placement.ReasonKept, ch.Reason)
	}

	// One chosen member leaves: the other two stay, in order, and one new member fills its room.
	var without []*v1alpha1.Cluster
	for _, c := range joined {
		if c.Name != first.Chosen[1].Cluster.Name {
			without = append(without, c)
		}
	}
	after := decide(t, p, again.Chosen, without...)
	require.Equal(t, []string{first.Chosen[0].Cluster.Name, first.Chosen[2].Cluster.Name}, chosenNames(after)[:2])
	require.Equal(t, placement.ReasonChosen, after.Chosen[2].Reason)

	// A lower count drops the last kept first.
	fewer := decide(t, placement.Policy{Count: ptr.To[int32](1)}, after.Chosen, without...)
	require.Equal(t, chosenNames(after)[:1], chosenNames(fewer))
	require.Equal(t, placement.ReasonOverCount, reasons(fewer)[after.Chosen[1].Cluster.Name])
}

// A Ready flap shorter than its toleration changes nothing; longer, the member leaves and another
// takes its place; IdentityChanged leaves at once; a member never chosen is not chosen while not
// Ready, tolerated or not.
func TestTolerations(t *testing.T) {
	p := placement.Policy{Count: ptr.To[int32](2), Tolerations: []placement.Toleration{
		{Reason: v1alpha1.ReasonUnreachable, Seconds: ptr.To[int64](300)},
		{Reason: v1alpha1.ReasonNotProbed},
	}}
	a, b, c := cluster("a"), cluster("b"), cluster("c")
	previous := []placement.Choice{{Cluster: key("a")}, {Cluster: key("b")}}

	d := decide(t, p, previous, notReady(cluster("a"), v1alpha1.ReasonUnreachable, time.Minute), b, c)
	require.Equal(t, []string{"a", "b"}, chosenNames(d))
	require.Equal(t, placement.ReasonTolerated, d.Chosen[0].Reason)
	require.Equal(t, now.Add(4*time.Minute), d.RecheckAt, "decide again when the toleration ends")

	d = decide(t, p, previous, notReady(cluster("a"), v1alpha1.ReasonUnreachable, 10*time.Minute), b, c)
	require.Equal(t, []string{"b", "c"}, chosenNames(d))
	require.Equal(t, placement.ReasonNotReady, reasons(d)["a"])
	require.Contains(t, explanation(d, "a"), "Ready is False (Unreachable) for 10m0s")

	d = decide(t, p, previous, notReady(cluster("a"), v1alpha1.ReasonNotProbed, 24*time.Hour), b, c)
	require.Equal(t, placement.ReasonTolerated, reasons(d)["a"], "a toleration without seconds holds as long as the reason")
	require.True(t, d.RecheckAt.IsZero())

	everything := placement.Policy{Count: ptr.To[int32](2), Tolerations: []placement.Toleration{{}}}
	d = decide(t, everything, previous, notReady(cluster("a"), v1alpha1.ReasonIdentityChanged, time.Second), b, c)
	require.Equal(t, placement.ReasonNotReady, reasons(d)["a"], "an endpoint that leads to another cluster was tolerated")

	d = decide(t, everything, nil, notReady(a, v1alpha1.ReasonUnreachable, time.Second), b)
	require.Equal(t, []string{"b"}, chosenNames(d), "a member not Ready was chosen for the first time")
	require.False(t, d.Satisfied)
}

// A placement with no tolerations keeps a chosen member through an outage of up to
// DefaultTolerationSeconds, whatever reasons it passes through, measured from when it stopped
// being Ready; a reason named with seconds 0 is not tolerated; credentials are no outage.
func TestDefaultTolerations(t *testing.T) {
	p := placement.Policy{Count: ptr.To[int32](2)}
	b, c := cluster("b"), cluster("c")
	previous := []placement.Choice{{Cluster: key("a")}, {Cluster: key("b")}}
	for _, reason := range []string{v1alpha1.ReasonUnreachable, v1alpha1.ReasonStarting, v1alpha1.ReasonNotReady, v1alpha1.ReasonAgentDisconnected} {
		d := decide(t, p, previous, notReady(cluster("a"), reason, time.Minute), b, c)
		require.Equal(t, []string{"a", "b"}, chosenNames(d), "a blip of %s moved the member", reason)
		require.Equal(t, now.Add(4*time.Minute), d.RecheckAt, "the default toleration is 300 s from when %s began", reason)

		d = decide(t, p, previous, notReady(cluster("a"), reason, 301*time.Second), b, c)
		require.Equal(t, []string{"b", "c"}, chosenNames(d), "an outage of %s past the default toleration kept the member", reason)
	}
	d := decide(t, p, previous, notReady(cluster("a"), v1alpha1.ReasonUnauthorized, time.Second), b, c)
	require.Equal(t, []string{"b", "c"}, chosenNames(d), "refused credentials are no outage, and not tolerated by default")
	d = decide(t, p, previous, notReady(cluster("a"), v1alpha1.ReasonServerUntrusted, time.Second), b, c)
	require.Equal(t, []string{"b", "c"}, chosenNames(d), "an impostor at the endpoint is no outage, and not tolerated by default")

	// Tolerating Unreachable for 60 s, as the demo's placement does, says nothing of Starting: a
	// restart that is Unreachable for 50 s, then Starting, is still one outage of 50 s.
	demo := placement.Policy{Count: ptr.To[int32](2), Tolerations: []placement.Toleration{{Reason: v1alpha1.ReasonUnreachable, Seconds: ptr.To[int64](60)}}}
	d = decide(t, demo, previous, notReady(cluster("a"), v1alpha1.ReasonStarting, 50*time.Second), b, c)
	require.Equal(t, []string{"a", "b"}, chosenNames(d))
	d = decide(t, demo, previous, notReady(cluster("a"), v1alpha1.ReasonUnreachable, 70*time.Second), b, c)
	require.Equal(t, []string{"b", "c"}, chosenNames(d), "the named toleration's 60 s no longer hold")

	strict := placement.Policy{Count: ptr.To[int32](2), Tolerations: []placement.Toleration{{Reason: v1alpha1.ReasonNotReady, Seconds: ptr.To[int64](0)}}}
	d = decide(t, strict, previous, notReady(cluster("a"), v1alpha1.ReasonNotReady, time.Second), b, c)
	require.Equal(t, []string{"b", "c"}, chosenNames(d), "NotReady named with seconds 0 was tolerated")
	compiled, err := placement.Compile(strict)
	require.NoError(t, err)
	require.Equal(t, []placement.Toleration{strict.Tolerations[0], {Reason: v1alpha1.ReasonUnreachable, Seconds: ptr.To[int64](300)},
		{Reason: v1alpha1.ReasonStarting, Seconds: ptr.To[int64](300)}, {Reason: v1alpha1.ReasonAgentDisconnected, Seconds: ptr.To[int64](300)}},
		compiled.Tolerations(), "Unreachable, Starting and AgentDisconnected keep their defaults")
	compiled, err = placement.Compile(placement.Policy{Tolerations: []placement.Toleration{{}}})
	require.NoError(t, err)
	require.Len(t, compiled.Tolerations(), 1, "a toleration of every reason leaves no default")
}

func key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "fleet", Name: name}
}

func explanation(d placement.Decision, name string) string {
	for _, e := range d.Explanations {
		if e.Cluster.Name == name {
			return e.Message
		}
	}
	return ""
}

// Spread across a label: domains filled evenly, never beyond MaxSkew of the one with fewest;
// a Cluster without the label is out, saying why.
func TestSpread(t *testing.T) {
	var candidates []*v1alpha1.Cluster
	for i := range 6 {
		candidates = append(candidates, cluster(fmt.Sprintf("eu-%d", i), "region", "eu"))
	}
	for i := range 3 {
		candidates = append(candidates, cluster(fmt.Sprintf("us-%d", i), "region", "us"))
	}
	candidates = append(candidates, cluster("ap-0", "region", "ap"), cluster("nowhere"))
	d := decide(t, placement.Policy{Count: ptr.To[int32](6), Spread: &placement.Spread{Label: "region"}}, nil, candidates...)
	per := map[string]int{}
	for _, ch := range d.Chosen {
		per[ch.Cluster.Name[:2]]++
	}
	// ap has 1 candidate: eu and us may reach 2 each (skew 1 above ap's 1), no more.
	require.Equal(t, map[string]int{"eu": 2, "us": 2, "ap": 1}, per)
	require.False(t, d.Satisfied, "6 asked, 5 within the skew")
	require.Equal(t, placement.ReasonSpread, reasons(d)["nowhere"])
	require.Contains(t, explanation(d, "nowhere"), "no region label")
	spreadOut := 0
	for _, e := range d.Explanations {
		if e.Reason == placement.ReasonSpread && e.Cluster.Name != "nowhere" {
			spreadOut++
			require.Contains(t, e.Message, "exceeds maxSkew 1")
		}
	}
	require.Equal(t, 5, spreadOut)

	wide := decide(t, placement.Policy{Count: ptr.To[int32](6), Spread: &placement.Spread{Label: "region", MaxSkew: 3}}, nil, candidates...)
	require.Len(t, wide.Chosen, 6)
}

// Rollout groups: in order, at most the size each; a member keeps its group while chosen, and a
// new member fills the first group with room.
func TestRolloutGroups(t *testing.T) {
	var candidates []*v1alpha1.Cluster
	for i := range 7 {
		candidates = append(candidates, cluster(fmt.Sprintf("m-%d", i)))
	}
	p := placement.Policy{RolloutGroupSize: ptr.To[int32](3)}
	d := decide(t, p, nil, candidates...)
	groups := map[types.NamespacedName]int{}
	sizes := map[int]int{}
	for _, ch := range d.Chosen {
		groups[ch.Cluster] = ch.Group
		sizes[ch.Group]++
	}
	require.Equal(t, map[int]int{0: 3, 1: 3, 2: 1}, sizes)

	// The first member of group 0 leaves and one joins: the others keep their groups, and the new
	// member takes the room in group 0.
	left := d.Chosen[0].Cluster
	var next []*v1alpha1.Cluster
	for _, c := range candidates {
		if c.Name != left.Name {
			next = append(next, c)
		}
	}
	next = append(next, cluster("m-new"))
	d2 := decide(t, p, d.Chosen, next...)
	for _, ch := range d2.Chosen {
		if ch.Cluster.Name == "m-new" {
			require.Equal(t, 0, ch.Group)
			continue
		}
		require.Equal(t, groups[ch.Cluster], ch.Group, ch.Cluster.String())
	}
}

// CEL sees the Cluster's labels, annotations, version and Ready reason; an expression that fails
// on a Cluster leaves it out, saying why; a bad policy is refused naming its field.
func TestCELAndBadPolicies(t *testing.T) {
	gold := cluster("gold", "tier", "gold")
	gold.Annotations = map[string]string{"owner": "team-a"}
	d := decide(t, placement.Policy{CEL: `cluster.labels["tier"] == "gold" && cluster.annotations["owner"] == "team-a" && cluster.version.startsWith("v1.36") && cluster.ready.reason == "Reachable"`},
		nil, gold, cluster("plain"))
	require.Equal(t, []string{"gold"}, chosenNames(d))

	d = decide(t, placement.Policy{CEL: `cluster.labels["tier"] == "gold"`}, nil, cluster("plain"))
	require.Equal(t, placement.ReasonCEL, reasons(d)["plain"])
	require.Contains(t, explanation(d, "plain"), "could not be evaluated: no such key: tier")
	d = decide(t, placement.Policy{CEL: `cluster.name`}, nil, cluster("plain"))
	require.Contains(t, explanation(d, "plain"), "could not be evaluated: the expression gave plain, not a bool")

	for _, tc := range []struct {
		policy placement.Policy
		want   string
	}{
		{placement.Policy{CEL: `"gold"`}, "cel: the expression is string, want bool"},
		{placement.Policy{CEL: `cluster.(`}, "cel: "},
		{placement.Policy{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Sometimes"}}}}, "selector: "},
		{placement.Policy{Count: ptr.To[int32](-1)}, "count: -1 is negative"},
		{placement.Policy{Spread: &placement.Spread{Label: "region"}}, "spread: needs count"},
		{placement.Policy{Count: ptr.To[int32](1), Spread: &placement.Spread{}}, "spread.label: required"},
		{placement.Policy{Tolerations: []placement.Toleration{{Reason: v1alpha1.ReasonIdentityChanged}}}, "tolerations[0].reason: IdentityChanged is never tolerated"},
		{placement.Policy{RolloutGroupSize: ptr.To[int32](0)}, "rolloutGroupSize: 0, want 1 or more"},
		{placement.Policy{Include: []string{"fleet/"}}, `include[0]: "fleet/", want NAME or SET/NAME`},
	} {
		_, err := placement.Compile(tc.policy)
		require.ErrorContains(t, err, tc.want)
	}
}

// An expression that would run long is stopped by the cost limit, and leaves the Cluster out.
func TestCELCostLimit(t *testing.T) {
	c := cluster("big")
	for i := range 200 {
		c.Labels[fmt.Sprintf("k%03d", i)] = "v"
	}
	d := decide(t, placement.Policy{CEL: `cluster.labels.all(a, cluster.labels.all(b, cluster.labels.all(x, a != "" && b != "" && x != "")))`}, nil, c)
	require.Empty(t, d.Chosen)
	require.Contains(t, explanation(d, "big"), "cost limit")
}
