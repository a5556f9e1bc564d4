package health

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/safetext"
)

// memberState is what the controller knows of one member between probes: the Ready condition
// it last wrote, the state that may replace it and how many probes in a row have seen it.
type memberState struct {
	writtenStatus
	lastProbe  time.Time
	candidate  metav1.Condition
	candidates int
}

// writtenStatus is the status the controller wrote (or adopted): what a write records.
type writtenStatus struct {
	written   *metav1.Condition // nil until the controller writes or adopts one
	version   string
	clusterID string
	expires   time.Time // status.credentialsExpireAt as written
	lastWrite time.Time
}

// verdict is what a probe decides for a member's status.
type verdict struct {
	// condition is the Ready condition to write.
	condition metav1.Condition
	// transition is true when the condition's status or reason changes.
	transition bool
	version    string
	clusterID  string
	// expires is status.credentialsExpireAt: what the probe's credentials say, or what was
	// written when the probe had none.
	expires time.Time
}

// decide folds one observation into the member's state and returns what its status should say,
// damped by the thresholds. current is the Cluster as the registry has it.
func (s *memberState) decide(current *v1alpha1.Cluster, o observation, opts *Options, now time.Time) verdict {
	s.lastProbe = now
	if s.written == nil {
		// Adopt what the registry says, so a restarted controller does not rewrite a true status.
		if c := current.Status.Condition(v1alpha1.ConditionReady); c != nil {
			adopted := *c
			s.written = &adopted
			s.version, s.clusterID = current.Status.Version, current.Status.ClusterID
			if t := current.Status.CredentialsExpireAt; t != nil {
				s.expires = t.Time
			}
			if t := current.Status.LastProbeTime; t != nil {
				s.lastWrite = t.Time
			}
		}
	}
	v := verdict{version: s.version, clusterID: s.recordedID(current), expires: s.expires}
	if o.version != "" {
		v.version = o.version
	}
	if o.resolved {
		v.expires = o.expires.Truncate(time.Second)
	}
	// Identity: recorded on first sight; a different one means the endpoints lead elsewhere.
	switch {
	case o.clusterID == "" && o.ready && s.written != nil && s.written.Reason == v1alpha1.ReasonIdentityChanged && v.clusterID != "":
		// A probe that did not read the identity (a kept connection's, which reads it only
		// when told to) says nothing of it: the endpoint still leads to the other cluster until
		// a probe finds the recorded one there. Before, two such probes turned Reachable again,
		// and a pending write of IdentityChanged was replaced before it was made.
		o = observation{reason: v1alpha1.ReasonIdentityChanged, message: s.written.Message}
	case o.clusterID == "":
	case v.clusterID == "":
		v.clusterID = o.clusterID
	case o.clusterID != v.clusterID:
		o = observation{reason: v1alpha1.ReasonIdentityChanged,
			message: "the endpoints now lead to the cluster " + o.clusterID + ", not " + v.clusterID + " as status.clusterID records; remove status.clusterID to accept it"}
	}
	want := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: o.reason, Message: safetext.Shorten(safetext.Printable(o.message), maxMessage)}
	if o.ready {
		want.Status = metav1.ConditionTrue
	}

	if s.written == nil || s.written.Status == metav1.ConditionUnknown {
		// Nothing true to protect from a flap: say what was seen at once.
		return s.accept(want, v, now)
	}
	if s.written.Status == want.Status && s.written.Reason == want.Reason {
		s.candidates = 0
		keep := *s.written
		keep.Message = want.Message
		v.condition = keep
		return v
	}
	if s.candidate.Status == want.Status && s.candidate.Reason == want.Reason {
		s.candidates++
	} else {
		s.candidate, s.candidates = want, 1
	}
	threshold := opts.FailureThreshold
	switch {
	case want.Status == metav1.ConditionTrue:
		threshold = opts.SuccessThreshold
	case want.Reason == v1alpha1.ReasonIdentityChanged:
		threshold = 1 // a redirected endpoint is not a flap
	}
	if s.candidates >= threshold {
		return s.accept(want, v, now)
	}
	v.condition = *s.written // not yet: the written condition stands
	return v
}

// recordedID is the identity status.clusterID records: the registry's copy of the Cluster, unless
// that copy predates this controller's last write (its lastProbeTime is older), which recorded
// the identity it learned: the Fleet's watch may not have brought that write back yet, and a
// verdict from the older copy would write the identity away (under load, a member's clusterID was
// never recorded: the next probe, over the kept connection that does not read it again, wrote
// the copy's empty one). A copy as new as the last write says what someone made of it since
// (removed, to accept another cluster).
func (s *memberState) recordedID(current *v1alpha1.Cluster) string {
	id := current.Status.ClusterID
	if id != "" || s.clusterID == "" || s.written == nil || s.lastWrite.IsZero() {
		return id
	}
	if p := current.Status.LastProbeTime; p == nil || p.Time.Before(s.lastWrite.Truncate(time.Second)) {
		return s.clusterID
	}
	return id
}

func (s *memberState) accept(want metav1.Condition, v verdict, now time.Time) verdict {
	// The transition time is when the status last changed, as metav1.Condition says, not the
	// reason: a member that goes from Unreachable to Starting to NotReady is one outage, and
	// placements measure their tolerations from when it began.
	want.LastTransitionTime = metav1.NewTime(now)
	if s.written != nil && s.written.Status == want.Status {
		want.LastTransitionTime = s.written.LastTransitionTime
	}
	if s.written == nil || s.written.Status != want.Status || s.written.Reason != want.Reason {
		v.transition = true
	}
	s.candidates = 0
	v.condition = want
	return v
}

// needsWrite reports whether the verdict changes the status, or the heartbeat is due.
func (s *memberState) needsWrite(v verdict, heartbeat time.Duration, now time.Time) bool {
	return s.written == nil || v.transition || v.version != s.version || v.clusterID != s.clusterID ||
		!v.expires.Equal(s.expires) || now.Sub(s.lastWrite) >= heartbeat
}

// wrote records a write: made, or queued to be made (see Controller.queueWrite).
func (s *memberState) wrote(v verdict, now time.Time) {
	c := v.condition
	s.writtenStatus = writtenStatus{written: &c, version: v.version, clusterID: v.clusterID, expires: v.expires, lastWrite: now}
}
