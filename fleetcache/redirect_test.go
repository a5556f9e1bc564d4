package fleetcache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// A member, or whatever answers at its address, that redirects the caches' lists and watches to
// another server gets nothing sent there: the caches' requests go through the member's pinned
// transport, whatever client follows the redirect. The member's status says why, and never the
// token.
func TestRedirectingMemberGetsNoCredentials(t *testing.T) {
	ns := newTestSet(t, false)
	ctx := testContext(t)
	hostile := fleettest.RedirectingMember(t, lf, ns, "hostile")
	const token = fleettest.RedirectingToken
	c := New(startFleet(t, ns))
	cms, err := Typed[*corev1.ConfigMap](c, configMaps, KindOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	hostileKey := types.NamespacedName{Namespace: ns, Name: "hostile"}
	var st Status
	require.Eventually(t, func() bool {
		st, _ = cms.Status(hostileKey)
		return st.Err != nil
	}, 20*time.Second, 20*time.Millisecond)
	var off *access.OffServerError
	require.ErrorAs(t, st.Err, &off, "%v", st.Err)
	require.Equal(t, Syncing, st.State)
	require.NotContains(t, st.String(), token)
	// The other members sync as ever.
	err = cms.WaitForCacheSync(ctx, 5*time.Second)
	var notSynced *NotSyncedError
	require.ErrorAs(t, err, &notSynced)
	require.Len(t, notSynced.Members, 1)
	require.Contains(t, notSynced.Members, hostileKey)
	require.NotContains(t, err.Error(), token)

	require.Empty(t, hostile.Heard(), "the redirect's target heard from the caches")
}
