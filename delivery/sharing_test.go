package delivery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
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

// A replica judges another replica's member by the overrides that choose it now, from the
// Cluster its Fleet holds (Sharding.Cluster): a member still at an older override's revision is
// not at the revision, though it runs REVISION-SOMETHING.
func TestAnotherReplicasMemberIsJudgedByItsOverrides(t *testing.T) {
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"site"},"data":{"host":"example.com"}}`
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "site", Namespace: "fleet"}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Manifests: []runtime.RawExtension{{Raw: []byte(cm)}}},
		Overrides: []v1alpha1.ReleaseOverride{{Name: "eu", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}},
			Patches: []v1alpha1.ReleasePatch{{Kind: "ConfigMap", Patch: `{"data":{"host":"eu.example.com"}}`}}}}}}
	b, err := Render(rel, Inputs{})
	require.NoError(t, err)
	key := types.NamespacedName{Namespace: "fleet", Name: "member-eu"}
	eu := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "member-eu", Labels: map[string]string{"region": "eu"}}}
	require.NotEqual(t, b.Revision, b.revisionFor(eu))

	stale := &memberState{revision: b.Revision + "-0123456789abcdef", objects: map[ref]*applied{}, readyAt: time.Now()}
	st := &releaseState{members: map[types.NamespacedName]*memberState{}, foreign: map[types.NamespacedName]*memberState{key: stale}}
	dec := &decision.Decision{Namespace: "fleet", Key: "site", Clusters: []types.NamespacedName{key}}
	judge := func(cluster func(types.NamespacedName) *v1alpha1.Cluster) view {
		c := &Controller{replica: replicaHash("a"), opts: ControllerOptions{Sharding: &Sharding{Replica: "a",
			Owner: func(string) string { return "b" }, Live: func() []string { return []string{"a", "b"} }, Cluster: cluster}}}
		return c.snapshot(st, dec, [][]types.NamespacedName{{key}}, b, gates{}, nil).views[key]
	}
	require.Equal(t, b.Revision, judge(nil).revision, "without the Cluster, any REVISION-HASH counts")
	known := judge(func(k types.NamespacedName) *v1alpha1.Cluster {
		return map[types.NamespacedName]*v1alpha1.Cluster{key: eu}[k]
	})
	require.NotEqual(t, b.Revision, known.revision, "at an older override's revision: not done")

	stale.revision = b.revisionFor(eu)
	known = judge(func(k types.NamespacedName) *v1alpha1.Cluster {
		return map[types.NamespacedName]*v1alpha1.Cluster{key: eu}[k]
	})
	require.Equal(t, b.Revision, known.revision, "at the overrides that choose it now")
}
