package decision_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

func chosen(ns string, n int) []decision.Chosen {
	out := make([]decision.Chosen, n)
	for i := range out {
		out[i] = decision.Chosen{Cluster: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("member-%03d", i)}, Reason: "fits the policy"}
	}
	return out
}

// A decision of 250 members is 3 slices of at most 100, which cluster-inventory-api's own types
// read back in order; writing it again writes nothing; a smaller one updates and deletes what is
// no longer needed; an empty one is one empty slice, not none; another scheduler's is left alone.
func TestWrite(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	ns := fleettest.NewSet(t, lf)
	client := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	opts := decision.WriteOptions{SchedulerName: "clusterregistry"}

	w, err := decision.Write(ctx, client, ns, "web", chosen(ns, 250), opts)
	require.NoError(t, err)
	require.Equal(t, decision.Written{Created: 3}, w)
	list, err := client.ApisV1alpha1().PlacementDecisions(ns).List(ctx, metav1.ListOptions{LabelSelector: cpv1alpha1.DecisionKeyLabel + "=web"})
	require.NoError(t, err)
	sizes := map[string]int{}
	for _, pd := range list.Items {
		sizes[pd.Name+"@"+pd.Labels[cpv1alpha1.DecisionIndexLabel]] = len(pd.Decisions)
		require.Equal(t, "clusterregistry", pd.SchedulerName)
	}
	require.Equal(t, map[string]int{"web-0@0": 100, "web-1@1": 100, "web-2@2": 50}, sizes)
	d, err := decision.Read(ctx, client, ns, "web")
	require.NoError(t, err)
	require.Len(t, d.Clusters, 250)
	require.Equal(t, "member-000", d.Clusters[0].Name)
	require.Equal(t, "member-249", d.Clusters[249].Name)
	require.Equal(t, "fits the policy", d.Reasons[d.Clusters[123]])

	w, err = decision.Write(ctx, client, ns, "web", chosen(ns, 250), opts)
	require.NoError(t, err)
	require.Equal(t, decision.Written{Unchanged: 3}, w)
	require.False(t, w.Changed())
	// The same, from slices the caller listed: what is there is taken from them.
	listed, err := decision.List(ctx, client, ns, "web")
	require.NoError(t, err)
	withExisting := opts
	withExisting.Existing = listed
	w, err = decision.Write(ctx, client, ns, "web", chosen(ns, 250), withExisting)
	require.NoError(t, err)
	require.Equal(t, decision.Written{Unchanged: 3}, w)

	w, err = decision.Write(ctx, client, ns, "web", chosen(ns, 120)[20:], opts) // 100 members
	require.NoError(t, err)
	require.Equal(t, decision.Written{Updated: 1, Deleted: 2}, w)
	d, err = decision.Read(ctx, client, ns, "web")
	require.NoError(t, err)
	require.Len(t, d.Clusters, 100)
	require.Equal(t, "member-020", d.Clusters[0].Name)

	// Rollout groups travel in an annotation of each slice, and come back.
	grouped := chosen(ns, 100)[20:]
	for i := range grouped {
		grouped[i].Group = i / 30
	}
	w, err = decision.Write(ctx, client, ns, "web", grouped, opts)
	require.NoError(t, err)
	require.Equal(t, decision.Written{Updated: 1}, w)
	d, err = decision.Read(ctx, client, ns, "web")
	require.NoError(t, err)
	require.Equal(t, 2, d.Groups[grouped[79].Cluster])
	g, ok := d.Groups[grouped[0].Cluster]
	require.True(t, ok && g == 0, "group 0 read back as no group")

	w, err = decision.Write(ctx, client, ns, "web", nil, opts)
	require.NoError(t, err)
	require.Equal(t, decision.Written{Updated: 1}, w)
	d, err = decision.Read(ctx, client, ns, "web")
	require.NoError(t, err, "an empty decision read as no decision")
	require.Empty(t, d.Clusters)

	var foreign *decision.ForeignDecisionError
	_, err = decision.Write(ctx, client, ns, "web", chosen(ns, 1), decision.WriteOptions{SchedulerName: "someone-else"})
	require.True(t, errors.As(err, &foreign), "%v", err)
	require.Contains(t, err.Error(), `belongs to scheduler "clusterregistry"`)

	_, err = decision.Write(ctx, client, ns, "web", []decision.Chosen{{Cluster: types.NamespacedName{Namespace: "other", Name: "x"}}}, opts)
	require.ErrorContains(t, err, "Cluster other/x is of another namespace")
	_, err = decision.Write(ctx, client, ns, "Web_1", nil, opts)
	require.ErrorContains(t, err, `decision key "Web_1"`)
}
