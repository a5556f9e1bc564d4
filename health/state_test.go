package health

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

var (
	up   = observation{ready: true, reason: v1alpha1.ReasonReachable, version: "v1.36.3", clusterID: "uid-a"}
	down = observation{reason: v1alpha1.ReasonUnreachable, message: "connection refused"}
)

// decideAll folds observations, a probe a second, and returns each verdict's Status/Reason and
// whether it was a transition.
func decideAll(s *memberState, c *v1alpha1.Cluster, opts *Options, obs ...observation) []string {
	var out []string
	now := time.Unix(1_800_000_000, 0)
	for _, o := range obs {
		now = now.Add(time.Second)
		v := s.decide(c, o, opts, now)
		mark := ""
		if v.transition {
			mark = "!"
		}
		if s.needsWrite(v, opts.Heartbeat, now) {
			s.wrote(v, now)
			c.Status.SetCondition(v.condition)
			c.Status.ClusterID = v.clusterID
			probed := metav1.NewTime(now) // as the writer writes it
			c.Status.LastProbeTime = &probed
		}
		out = append(out, string(v.condition.Status)+"/"+v.condition.Reason+mark)
	}
	return out
}

// A message quotes what others wrote (here, a Secret's annotation in the Resolver's error): the
// condition carries it as printable text, at most maxMessage bytes.
func TestMessagesArePrintableAndBounded(t *testing.T) {
	opts := &Options{FailureThreshold: 1, SuccessThreshold: 1, Heartbeat: time.Hour}
	s, c := &memberState{}, &v1alpha1.Cluster{}
	o := observation{reason: v1alpha1.ReasonCredentialsUnavailable,
		message: "Secret fleet/x pins its credentials to \x1b[2J\u009b\r\xff,\nand more " + strings.Repeat("é", maxMessage)}
	v := s.decide(c, o, opts, time.Unix(1_800_000_000, 0))
	require.True(t, strings.HasPrefix(v.condition.Message, "Secret fleet/x pins its credentials to \uFFFD[2J\uFFFD\uFFFD\uFFFD,\nand more éé"), v.condition.Message[:80])
	require.LessOrEqual(t, len(v.condition.Message), maxMessage)
	require.True(t, strings.HasSuffix(v.condition.Message, "é..."))
}

func TestDampingNeedsThresholdProbesInARow(t *testing.T) {
	opts := &Options{FailureThreshold: 3, SuccessThreshold: 2, Heartbeat: time.Hour}
	s, c := &memberState{}, &v1alpha1.Cluster{}
	got := decideAll(s, c, opts, up, down, down, up, down, down, down, up, up)
	require.Equal(t, []string{
		"True/Reachable!",    // first sight: said at once
		"True/Reachable",     // one failure
		"True/Reachable",     // two
		"True/Reachable",     // an answer resets the count
		"True/Reachable",     // one
		"True/Reachable",     // two
		"False/Unreachable!", // three in a row
		"False/Unreachable",  // one success
		"True/Reachable!",    // two
	}, got)
}

func TestIdentityIsRecordedAndAChangeIsAtOnce(t *testing.T) {
	opts := &Options{FailureThreshold: 3, SuccessThreshold: 2, Heartbeat: time.Hour}
	s, c := &memberState{}, &v1alpha1.Cluster{}
	other := up
	other.clusterID = "uid-b"
	got := decideAll(s, c, opts, up, other)
	require.Equal(t, []string{"True/Reachable!", "False/IdentityChanged!"}, got)
	require.Equal(t, "uid-a", c.Status.ClusterID, "the recorded identity is kept")
	require.Contains(t, c.Status.Condition(v1alpha1.ConditionReady).Message, "remove status.clusterID to accept it")

	// Someone accepts the new cluster by removing the recorded identity.
	c.Status.ClusterID = ""
	got = decideAll(s, c, opts, other, other)
	require.Equal(t, []string{"False/IdentityChanged", "True/Reachable!"}, got)
	require.Equal(t, "uid-b", c.Status.ClusterID)
}

// With KeepConnections, probes over an open connection do not read the identity: they must not
// turn an IdentityChanged member Reachable again (TestKeepConnectionsSeesAReinstalledCluster saw
// a reinstalled cluster stay Reachable under load: two such probes undid the verdict, or replaced
// its pending write). Only a probe that reads the recorded identity there does.
func TestUnidentifiedProbesKeepIdentityChanged(t *testing.T) {
	opts := &Options{FailureThreshold: 3, SuccessThreshold: 2, Heartbeat: time.Hour}
	s, c := &memberState{}, &v1alpha1.Cluster{}
	other, kept := up, up
	other.clusterID, kept.clusterID, kept.version = "uid-b", "", ""
	got := decideAll(s, c, opts, up, other, kept, kept, kept, up, up)
	require.Equal(t, []string{
		"True/Reachable!", "False/IdentityChanged!",
		"False/IdentityChanged", "False/IdentityChanged", "False/IdentityChanged", // kept connections
		"False/IdentityChanged", "True/Reachable!", // the recorded cluster answers again, twice
	}, got)
	require.Equal(t, "uid-a", c.Status.ClusterID)
}

// The identity a probe learned is not written away by the next verdict while the registry's copy
// of the Cluster predates the write that recorded it (the Fleet's watch lagging behind it, under
// load): TestKeepConnectionsSeesAReinstalledCluster saw member-2's clusterID never recorded.
func TestALaggingCopyKeepsTheLearnedIdentity(t *testing.T) {
	opts := &Options{FailureThreshold: 3, SuccessThreshold: 2, Heartbeat: time.Hour}
	s, c := &memberState{}, &v1alpha1.Cluster{}
	now := time.Unix(1_800_000_000, 0)
	v := s.decide(c, up, opts, now)
	require.Equal(t, "uid-a", v.clusterID)
	require.True(t, s.needsWrite(v, opts.Heartbeat, now))
	s.wrote(v, now)
	// The registry's copy is still the one from before the write; a probe over a kept
	// connection does not read the identity.
	kept := up
	kept.clusterID = ""
	v = s.decide(c, kept, opts, now.Add(time.Second))
	require.Equal(t, "uid-a", v.clusterID, "a verdict from the lagging copy dropped the identity")
	require.False(t, s.needsWrite(v, opts.Heartbeat, now.Add(time.Second)), "it would write the identity away")

	// Once the copy is as new as the write and someone removed the identity, that stands.
	probed := metav1.NewTime(now)
	c.Status.LastProbeTime = &probed
	v = s.decide(c, kept, opts, now.Add(2*time.Second))
	require.Empty(t, v.clusterID)
}

// A controller that restarts adopts the Ready condition it finds, and does not rewrite a status
// that is still true.
func TestAdoptsTheRegistrysStatus(t *testing.T) {
	opts := &Options{FailureThreshold: 3, SuccessThreshold: 2, Heartbeat: time.Hour}
	c := &v1alpha1.Cluster{}
	probed := metav1.NewTime(time.Unix(1_800_000_000, 0))
	c.Status = v1alpha1.ClusterStatus{Version: "v1.36.3", ClusterID: "uid-a", LastProbeTime: &probed}
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReachable, LastTransitionTime: probed})
	s := &memberState{}
	v := s.decide(c, up, opts, probed.Add(time.Second))
	require.False(t, v.transition)
	require.False(t, s.needsWrite(v, opts.Heartbeat, probed.Add(time.Second)))
	require.True(t, s.needsWrite(v, opts.Heartbeat, probed.Add(time.Hour)), "the heartbeat is due")
}

// status.credentialsExpireAt follows the credentials a probe had: written when they change (a
// rotation), kept when a probe had none (the Secret unreadable for a moment), cleared when
// credentials that do not say replace them; adopted from the registry on restart.
func TestCredentialsExpiryIsWrittenWhenItChanges(t *testing.T) {
	opts := &Options{FailureThreshold: 3, SuccessThreshold: 2, Heartbeat: time.Hour}
	s, c := &memberState{}, &v1alpha1.Cluster{}
	now := time.Unix(1_800_000_000, 0)
	first, renewed := now.Add(8*time.Hour), now.Add(13*time.Hour)
	step := func(o observation) (time.Time, bool) {
		now = now.Add(time.Second)
		v := s.decide(c, o, opts, now)
		write := s.needsWrite(v, opts.Heartbeat, now)
		if write {
			s.wrote(v, now)
			c.Status.SetCondition(v.condition)
			c.Status.ClusterID = v.clusterID
		}
		return v.expires, write
	}
	withExpiry := func(at time.Time) observation { o := up; o.resolved, o.expires = true, at; return o }
	got, write := step(withExpiry(first))
	require.True(t, write)
	require.Equal(t, first, got)
	got, write = step(withExpiry(first))
	require.False(t, write, "an unchanged expiry is written again")
	require.Equal(t, first, got)
	got, write = step(withExpiry(renewed))
	require.True(t, write, "a renewed token's expiry is not written")
	require.Equal(t, renewed, got)
	got, write = step(observation{reason: v1alpha1.ReasonCredentialsUnavailable}) // no credentials this time
	require.False(t, write)
	require.Equal(t, renewed, got, "a probe without credentials dropped the expiry")
	got, write = step(observation{ready: true, reason: v1alpha1.ReasonReachable, resolved: true}) // credentials that do not say
	require.True(t, write)
	require.True(t, got.IsZero())

	restarted := &memberState{}
	at := metav1.NewTime(renewed)
	c.Status.CredentialsExpireAt = &at
	v := restarted.decide(c, observation{reason: v1alpha1.ReasonUnreachable}, opts, now.Add(time.Second))
	require.Equal(t, renewed, v.expires, "a restarted controller dropped the recorded expiry")
}

// One outage is one outage: a member that goes from Unreachable to Starting to NotReady keeps
// the Ready condition's transition time of when it stopped being Ready, which placements measure
// their tolerations from; each change of reason is still a transition (an Event says it). Ready
// again, the time moves.
func TestTransitionTimeMovesWithTheStatusOnly(t *testing.T) {
	opts := &Options{FailureThreshold: 1, SuccessThreshold: 1, Heartbeat: time.Hour}
	s, c := &memberState{}, &v1alpha1.Cluster{}
	starting := observation{reason: v1alpha1.ReasonStarting, message: "starting: waiting for poststarthook/rbac/bootstrap-roles"}
	notReady := observation{reason: v1alpha1.ReasonNotReady, message: "failing checks: etcd"}
	got := decideAll(s, c, opts, up, down)
	require.Equal(t, []string{"True/Reachable!", "False/Unreachable!"}, got)
	since := c.Status.Condition(v1alpha1.ConditionReady).LastTransitionTime
	got = decideAll(s, c, opts, starting, notReady)
	require.Equal(t, []string{"False/Starting!", "False/NotReady!"}, got)
	require.Equal(t, since, c.Status.Condition(v1alpha1.ConditionReady).LastTransitionTime, "the outage's start moved with its reason")
	decideAll(s, c, opts, up)
	require.NotEqual(t, since, c.Status.Condition(v1alpha1.ConditionReady).LastTransitionTime)
}
