package scheduler

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/placement"
)

// decidedOf is a Decision whose chosen members are those explained with a reason to be in.
func decidedOf(es ...placement.Explanation) *placement.Decision {
	d := &placement.Decision{Explanations: es}
	for _, e := range es {
		if e.Reason.Chosen() {
			d.Chosen = append(d.Chosen, placement.Choice{Cluster: e.Cluster, Reason: e.Reason})
		}
	}
	return d
}

func explained(name string, r placement.Reason, score float64) placement.Explanation {
	return placement.Explanation{Cluster: types.NamespacedName{Namespace: "fleet", Name: name}, Reason: r, Score: &score}
}

func TestScoresOf(t *testing.T) {
	first := decidedOf(explained("b", placement.ReasonChosen, 2), explained("a", placement.ReasonChosen, 2),
		explained("c", placement.ReasonOverCount, 9), placement.Explanation{Cluster: types.NamespacedName{Name: "d"}, Reason: placement.ReasonResourcesUnknown})
	scores := scoresOf(nil, first)
	require.Equal(t, []v1alpha1.PlacementScore{{Cluster: "a", Score: "2", Reason: "Chosen"}, {Cluster: "b", Score: "2", Reason: "Chosen"},
		{Cluster: "c", Score: "9", Reason: "OverCount"}}, scores, "the chosen first, ties by name; the unscored left out")

	moved := decidedOf(explained("a", placement.ReasonKept, 0.5), explained("b", placement.ReasonKept, 7), explained("c", placement.ReasonOverCount, 1))
	require.Equal(t, scores, scoresOf(scores, moved), "the same members, their scores moved: the scores they were chosen by are kept")

	swapped := decidedOf(explained("a", placement.ReasonKept, 0.5), explained("c", placement.ReasonChosen, 1), explained("b", placement.ReasonRebalanced, 7))
	require.Equal(t, []v1alpha1.PlacementScore{{Cluster: "c", Score: "1", Reason: "Chosen"}, {Cluster: "a", Score: "0.5", Reason: "Chosen"},
		{Cluster: "b", Score: "7", Reason: "Rebalanced"}}, scoresOf(scores, swapped), "a member changed: the decision's own scores")

	grown := decidedOf(explained("a", placement.ReasonKept, 0.5), explained("b", placement.ReasonKept, 7), explained("c", placement.ReasonChosen, 1))
	require.Len(t, scoresOf(scores, grown), 3, "a member more: the decision's own scores")

	require.Nil(t, scoresOf(scores, decidedOf(placement.Explanation{Cluster: types.NamespacedName{Name: "a"}, Reason: placement.ReasonChosen})), "without prefer, no scores")
}

func TestScoresOfAreBounded(t *testing.T) {
	var es []placement.Explanation
	for i := range 10000 {
		r := placement.ReasonChosen
		if i%2 == 1 {
			r = placement.ReasonOverCount
		}
		es = append(es, explained(fmt.Sprintf("m-%05d", i), r, float64(i%1000)))
	}
	scores := scoresOf(nil, decidedOf(es...))
	require.Len(t, scores, v1alpha1.MaxPlacementScoresChosen+v1alpha1.MaxPlacementScoresLeftOut)
	require.Equal(t, v1alpha1.PlacementScore{Cluster: "m-00998", Score: "998", Reason: "Chosen"}, scores[0], "the best chosen first")
	require.Equal(t, v1alpha1.PlacementScore{Cluster: "m-00999", Score: "999", Reason: "OverCount"}, scores[v1alpha1.MaxPlacementScoresChosen], "then the best left out")
	for i := 1; i < len(scores); i++ {
		if i != v1alpha1.MaxPlacementScoresChosen {
			prev, _ := strconv.ParseFloat(scores[i-1].Score, 64)
			this, _ := strconv.ParseFloat(scores[i].Score, 64)
			require.GreaterOrEqual(t, prev, this, "scores[%d] after a lower one", i)
		}
	}
	require.Equal(t, scores, scoresOf(scores, decidedOf(es...)), "kept: its 90 chosen are still chosen, and 90 of the chosen are scored")
}
