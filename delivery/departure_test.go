package delivery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// setReady writes Cluster name's Ready condition, as the health controller would.
func (e *deliveryEnv) setReady(t *testing.T, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	clusters := e.registry.ClusterregistryV1alpha1().Clusters(e.ns)
	c, err := clusters.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: "set by the test"})
	_, err = clusters.UpdateStatus(t.Context(), c, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// memberPhase is member's entry in the Release's worst members, if it is there.
func memberPhase(r *v1alpha1.Release, member string) *v1alpha1.ReleaseMemberStatus {
	for i := range r.Status.Worst {
		if r.Status.Worst[i].Cluster == member {
			return &r.Status.Worst[i]
		}
	}
	return nil
}

// A member that leaves the decision because its Cluster is not Ready keeps the Release's objects
// (the same uid: nothing deleted and made again), Departed, saying what it waits for; back in
// the decision it is Ready with them. Once its Cluster is Ready again, its replacement Ready and
// the departure grace over, its objects are removed: a health departure ends as a deliberate one
// does, only later.
func TestHealthDepartureKeepsObjects(t *testing.T) {
	env := startDelivery(t)
	env.decide(t, "member-1", "member-2")
	name := "departs-" + env.ns
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "departs", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:                v1alpha1.ReleaseSource{Manifests: manifests(t, configMap(name, map[string]string{"k": "v"}))},
		Placement:             v1alpha1.ReleasePlacement{Name: "web"},
		DepartureGraceSeconds: ptr.To[int64](3),
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "departs", "both ready", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	member2 := env.members["member-2"].CoreV1().ConfigMaps("default")
	first, err := member2.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	requireSame := func(what string) {
		t.Helper()
		cm, err := member2.Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err, "%s: member-2 lost the Release's object", what)
		require.Equal(t, first.UID, cm.UID, "%s: member-2's object was deleted and made again", what)
	}

	// member-2 goes Unreachable past the placement's tolerations, and leaves the decision.
	env.setReady(t, "member-2", metav1.ConditionFalse, v1alpha1.ReasonUnreachable)
	env.decide(t, "member-1")
	got := env.waitRelease(t, "departs", "member-2 departed", func(r *v1alpha1.Release) bool {
		m := memberPhase(r, "member-2")
		return m != nil && m.Phase == v1alpha1.PhaseDeparted && strings.Contains(m.Message, "its Cluster is not Ready (Unreachable)")
	})
	require.Equal(t, "LeftWhileNotReady", memberPhase(got, "member-2").Reason)
	time.Sleep(time.Second) // a removal would have begun by now
	requireSame("departed while Unreachable")
	// While it waits to be Ready again, the Release is looked at every RetryAfter (2 s here), and
	// nothing is written: not its status, not its slices, nothing on a member.
	writes := env.ctrl.Writes()
	time.Sleep(5 * time.Second)
	require.Equal(t, writes, env.ctrl.Writes(), "a departed member's Release wrote with nothing changing")
	slices := env.statusSlices(t, "departs")
	require.NotNil(t, slices["member-2"].DepartedAt, "the departure's time is not kept where a restarted controller reads it")

	// Back in the decision: Ready with the same object.
	env.setReady(t, "member-2", metav1.ConditionTrue, v1alpha1.ReasonReachable)
	env.decide(t, "member-1", "member-2")
	env.waitRelease(t, "departs", "both ready again", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 && len(r.Status.Worst) == 0 })
	requireSame("back in the decision")

	// Gone again, then Ready again outside the decision: once the grace is over, removed.
	env.setReady(t, "member-2", metav1.ConditionFalse, v1alpha1.ReasonNotReady)
	env.decide(t, "member-1")
	env.waitRelease(t, "departs", "member-2 departed again", func(r *v1alpha1.Release) bool {
		m := memberPhase(r, "member-2")
		return m != nil && m.Phase == v1alpha1.PhaseDeparted
	})
	requireSame("departed while NotReady")
	env.setReady(t, "member-2", metav1.ConditionTrue, v1alpha1.ReasonReachable)
	require.Eventually(t, func() bool {
		_, err := member2.Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond, "member-2 kept the objects after its grace")
	env.waitRelease(t, "departs", "one member, nothing departed", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 && len(r.Status.Worst) == 0 })
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "departs", metav1.DeleteOptions{}))
}

// statusSlices are the members' entries in a Release's status slices, by Cluster name.
func (e *deliveryEnv) statusSlices(t *testing.T, release string) map[string]v1alpha1.ReleaseMemberStatus {
	t.Helper()
	list, err := e.registry.ClusterregistryV1alpha1().ReleaseStatusSlices(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=" + release})
	require.NoError(t, err)
	out := map[string]v1alpha1.ReleaseMemberStatus{}
	for _, s := range list.Items {
		for _, m := range s.Members {
			out[types.NamespacedName{Namespace: e.ns, Name: m.Cluster}.Name] = m
		}
	}
	return out
}
