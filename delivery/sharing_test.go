package delivery

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// What a replica knows of another replica's member follows that replica's slice: kept while the
// slice's version is the same, read again when it changes or the revision does; readiness keeps
// the time this replica first saw the member Ready.
func TestShareReadsAMemberAgainWhenItsSliceChanges(t *testing.T) {
	c, st, others := shareFixture(300)
	live := c.live()
	c.share(st, c.reports(others, live), "r1", true)
	s := others[0]
	key := types.NamespacedName{Namespace: "fleet", Name: s.Members[0].Cluster}
	first := st.foreign[key]
	require.NotNil(t, first)
	require.True(t, first.ready(), "Ready, as its slice says")

	c.share(st, c.reports(others, live), "r1", true)
	require.Same(t, first, st.foreign[key], "an unchanged slice is not read again")

	s.Members[0].Phase, s.Members[0].Reason = v1alpha1.PhaseFailed, v1alpha1.FailureInvalid
	s.ResourceVersion = "2"
	c.share(st, c.reports(others, live), "r1", true)
	require.NotSame(t, first, st.foreign[key])
	require.False(t, st.foreign[key].ready(), "failed, as the new version of its slice says")
	require.Equal(t, v1alpha1.FailureInvalid, st.foreign[key].err.class)

	s.Members[0].Phase, s.Members[0].Reason = v1alpha1.PhaseReady, ""
	s.ResourceVersion = "3"
	c.share(st, c.reports(others, live), "r1", true)
	again := st.foreign[key]
	require.True(t, again.ready())
	c.share(st, c.reports(others, live), "r2", true)
	require.NotSame(t, again, st.foreign[key], "judged again at a new revision")
	require.Equal(t, "r2", st.foreign[key].judgedAt)
	require.Equal(t, again.readyAt, st.foreign[key].readyAt, "Ready since this replica first saw it so")
}
