package delivery

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/shard"
)

// Sharding divides the members of every Release between the replicas of a group (see package
// shard): each replica applies to the members it owns and reports them in ReleaseStatusSlices of
// its own (labelled v1alpha1.ReplicaLabel); the replica that owns a Release writes its
// Release.status from every replica's slices, and every replica judges the rollout's waves from
// them, so a wave is done only when each of its members, whoever owns it, reports the revision
// applied and healthy.
//
// A member that moves between replicas keeps being reported by the one that gave it up until the
// one that took it reports it; the one that took it reads what was applied there from the
// other's slice, so that a later prune or removal knows every object. The members of a replica
// that is no longer live are taken over by the Release's owner from that replica's slices, which
// it deletes once every member they name is reported by a live replica.
type Sharding struct {
	// Replica is this replica's identity in its group (shard.Peers.Self().ID).
	Replica string
	// Owner is the live replica that owns a key ("namespace/name" of a member or of a Release),
	// as this replica sees the group now (shard.Owner over shard.Peers.Live()).
	Owner func(key string) string
	// Live are the live replicas' identities, as this replica sees the group now.
	Live func() []string
	// Cluster is any member's Cluster as this replica's Fleet holds it, owned or not; nil when
	// it holds none. A replica judges the waves from every replica's reports, and a member that
	// spec.overrides choose runs the Release's revision with a hash of the overrides
	// (REVISION-HASH): knowing the Cluster, a replica tells whether another replica's member runs
	// the overrides that choose it now, rather than counting any REVISION-HASH as the revision.
	// Optional, but without it a member whose overrides changed counts as done in its wave
	// before its replica has applied them.
	Cluster func(key types.NamespacedName) *v1alpha1.Cluster
}

// NewSharding is the Sharding of this replica of peers' group: it owns what shard.Owner gives it
// among the live peers, as it sees them now, and finds any member's Cluster in fleet, the Fleet
// its members are a shard.View of. It is what clusterregistry controllers --shard-group gives
// its releases controller.
func NewSharding(peers *shard.Peers, fleet *multicluster.Fleet) *Sharding {
	return &Sharding{
		Replica: peers.Self().ID,
		Owner:   func(key string) string { return shard.Owner(key, peers.Live()) },
		Live: func() []string {
			var ids []string
			for _, p := range peers.Live() {
				ids = append(ids, p.ID)
			}
			return ids
		},
		Cluster: func(key types.NamespacedName) *v1alpha1.Cluster {
			if m := fleet.Member(key.Namespace, key.Name); m != nil {
				return m.Cluster()
			}
			return nil
		},
	}
}

// clusterOf is a member's Cluster, as this replica's members or else its Fleet (Sharding.Cluster)
// hold it; nil when neither does.
func (c *Controller) clusterOf(key types.NamespacedName, byName map[types.NamespacedName]*multicluster.Member) *v1alpha1.Cluster {
	if m := byName[key]; m != nil {
		return m.Cluster()
	}
	if s := c.opts.Sharding; s != nil && s.Cluster != nil {
		return s.Cluster(key)
	}
	return nil
}

// replicaHash is the label value and slice name part that names a replica: identities may be
// longer than a label value allows.
func replicaHash(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:5])
}

// owns says whether this replica owns a member or a Release; every one when not sharded.
func (c *Controller) owns(key types.NamespacedName) bool {
	s := c.opts.Sharding
	return s == nil || s.Owner(key.String()) == s.Replica
}

// live is the set of live replicas, by replicaHash ("" alone when not sharded).
func (c *Controller) live() map[string]bool {
	s := c.opts.Sharding
	if s == nil {
		return map[string]bool{"": true}
	}
	out := map[string]bool{}
	for _, id := range s.Live() {
		out[replicaHash(id)] = true
	}
	return out
}

// report is one member as another replica's slice reports it.
type report struct {
	status *v1alpha1.ReleaseMemberStatus // the slice's, in the informer's cache: read, never written
	// from is the slice, as "name@resourceVersion": a member taken from a slice is not taken
	// again from the same version of it.
	from    string
	replica string
	live    bool
}

// slicesOf are a Release's status slices: this replica's, and the others' by their replica.
func (c *Controller) slicesOf(rel *v1alpha1.Release) (mine, others []*v1alpha1.ReleaseStatusSlice) {
	objs, _ := c.sliceLister.ByNamespace(rel.Namespace).List(labels.SelectorFromSet(labels.Set{v1alpha1.ReleaseLabel: rel.Name}))
	for _, o := range objs {
		s := o.(*v1alpha1.ReleaseStatusSlice)
		if !metav1.IsControlledBy(s, rel) {
			continue
		}
		if s.Labels[v1alpha1.ReplicaLabel] == c.replica {
			mine = append(mine, s)
		} else {
			others = append(others, s)
		}
	}
	slices.SortFunc(others, func(a, b *v1alpha1.ReleaseStatusSlice) int { return cmp.Compare(a.Name, b.Name) })
	return mine, others
}

// reports are the members other replicas' slices report, each by the replica that owns it now
// when that one reports it (a member moving between replicas is in two slices for a while),
// otherwise by a live replica, otherwise by the first slice that names it.
func (c *Controller) reports(others []*v1alpha1.ReleaseStatusSlice, live map[string]bool) map[types.NamespacedName]report {
	n := 0
	for _, s := range others {
		n += len(s.Members)
	}
	out := make(map[types.NamespacedName]report, n)
	rank := func(r report, key types.NamespacedName) int {
		switch {
		case c.opts.Sharding != nil && r.live && replicaHash(c.opts.Sharding.Owner(key.String())) == r.replica:
			return 2
		case r.live:
			return 1
		}
		return 0
	}
	for _, s := range others {
		replica, from := s.Labels[v1alpha1.ReplicaLabel], s.Name+"@"+s.ResourceVersion
		for i := range s.Members {
			m := &s.Members[i]
			key := types.NamespacedName{Namespace: s.Namespace, Name: m.Cluster}
			r := report{status: m, from: from, replica: replica, live: live[replica]}
			if have, ok := out[key]; !ok || rank(r, key) > rank(have, key) {
				out[key] = r
			}
		}
	}
	return out
}

// share brings, with c.mu held, what this replica holds of a Release in line with the others'
// reports: it takes the members it owns that another replica reports objects on (and, when it
// owns the Release, those of replicas no longer live), and lets go of the members it no longer
// owns once a live replica reports them. It also keeps what the others report, for the waves.
func (c *Controller) share(st *releaseState, reps map[types.NamespacedName]report, revision string, ownsRelease bool) {
	if st.taken == nil {
		st.taken = map[types.NamespacedName]string{}
	}
	for key, r := range reps {
		ms := st.members[key]
		owned := c.owns(key)
		switch {
		case ms == nil && len(r.status.Objects) > 0 && (owned || (ownsRelease && !r.live)) && st.taken[key] != r.from:
			st.taken[key] = r.from
			st.members[key] = inventory(*r.status)
		case ms != nil && !owned && r.live && c.opts.Sharding != nil && replicaHash(c.opts.Sharding.Owner(key.String())) == r.replica && !ms.applying && !ms.removing:
			// The member's owner reports it now: it has what this replica applied there.
			delete(st.members, key)
		}
	}
	// What the others report of the members this replica does not hold, for the waves. A report
	// read before, from the same version of its slice and for the same revision, is kept as it
	// was read: a pass that no slice changed reads none again (BenchmarkShare), and a member's
	// readiness stays as old as this replica's first sight of it Ready at the revision.
	foreign := make(map[types.NamespacedName]*memberState, len(st.foreign))
	for key, r := range reps {
		if st.members[key] != nil && c.owns(key) {
			continue
		}
		old := st.foreign[key]
		if old != nil && old.source == r.from && old.judgedAt == revision {
			foreign[key] = old
			continue
		}
		foreign[key] = foreignState(r, revision, old)
	}
	st.foreign = foreign
}

// foreignState is a member as another replica's report says it stands, judged at revision; old
// is what the last report said of it, if anything.
func foreignState(r report, revision string, old *memberState) *memberState {
	ms := inventory(*r.status)
	ms.source, ms.judgedAt = r.from, revision
	for _, o := range r.status.Objects {
		a := ms.objects[refOf(o)]
		a.status, a.message, a.gone = o.Status, o.Message, o.Status == "NotFound"
	}
	if r.status.LastApplied != nil {
		ms.applied = r.status.LastApplied.Time
	}
	ms.revision = r.status.Revision
	if old != nil && old.settled == ms.revision {
		ms.settled = old.settled
	}
	if r.status.Phase == v1alpha1.PhaseFailed || r.status.Phase == v1alpha1.PhaseUnreachable {
		// The report does not say at which revision it failed: counted as failed at this one
		// until its replica reports it again (on the same events as this one's turn).
		ms.err, ms.failedRev, ms.failedAt = &memberError{class: r.status.Reason}, revision, time.Now()
	}
	if old != nil && old.revision == ms.revision && r.status.Phase == v1alpha1.PhaseReady {
		ms.readyAt = old.readyAt
	}
	if r.status.Phase != v1alpha1.PhaseReady {
		ms.objects = map[ref]*applied{} // not ready, whatever its objects say
	}
	ms.settle(time.Now())
	return ms
}

// inventory is a member's state as a slice reports it: the objects applied there.
func inventory(m v1alpha1.ReleaseMemberStatus) *memberState {
	ms := &memberState{objects: map[ref]*applied{}}
	for _, o := range m.Objects {
		r := refOf(o)
		ms.objects[r] = &applied{ref: r}
	}
	ms.reported.revision, ms.shares = m.Revision, m.Shares
	if m.LastApplied != nil {
		ms.reported.applied = m.LastApplied.Time
	}
	if m.DepartedAt != nil {
		ms.departedAt = m.DepartedAt.Time
	}
	if m.Phase == v1alpha1.PhaseDegraded {
		ms.settled = m.Revision // only a member that finished its wave is Degraded
	}
	return ms
}

func refOf(o v1alpha1.ReleaseObjectStatus) ref {
	return ref{GVR: schema.GroupVersionResource{Group: o.Group, Version: o.Version, Resource: o.Resource}, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
}

// at is how a member stands for the rollout's waves, with c.mu held: this replica's own state of
// the members it owns, the owner's report of the others.
func (st *releaseState) at(c *Controller, key types.NamespacedName) *memberState {
	if ms := st.members[key]; ms != nil && (c.owns(key) || st.foreign[key] == nil) {
		return ms
	}
	return st.foreign[key]
}
