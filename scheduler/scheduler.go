package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/internal/reconcilequeue"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/placement"
)

// Placement is one placement to keep decided: its decision goes to the PlacementDecisions of
// Key.Namespace labelled with decision key Key.Name, and chooses among that namespace's
// members (a decision names its own cluster set's members only).
type Placement struct {
	Key    types.NamespacedName
	Policy *placement.Compiled
	// Owner, if set, owns the decision's slices (the Placement object), so that the garbage
	// collector deletes them with it even if no scheduler runs.
	Owner *metav1.OwnerReference
	// Generation is the generation of the object Policy came from, given back to
	// Options.Decided; 0 when there is none.
	Generation int64
	// LastRebalance is when a rebalance last moved its members (the object's
	// status.lastRebalanceTime), from which its policy's cooldown counts; the Scheduler moves it
	// on when a decision rebalances, and gives it back to Options.Decided.
	LastRebalance time.Time
}

// Options configure a Scheduler.
type Options struct {
	// SchedulerName is written in every slice; slices of another scheduler are left alone.
	// Required.
	SchedulerName string
	// Fresh, if set, says whether the members are the registry's as it is now (for a Fleet,
	// func() bool { return fleet.Status().Fresh() }): while it is false, nothing is decided or
	// written. Without it the members are taken as fresh.
	Fresh func() bool
	// Workers is how many placements are decided at once; 4 when zero.
	Workers int
	// Logger hears what could not be written, and why; discarded when unset.
	Logger logr.Logger
	// Decided, if set, hears each decision once it is written (or found unchanged): the
	// placement decided, and the decision with every candidate's reason. It runs on the
	// deciding worker, so it must not block.
	Decided func(Placement, placement.Decision)
	// Failed, if set, hears each time a placement's decision could not be read or written (it is
	// retried, with backoff): a slice of its key written by another scheduler
	// (*decision.ForeignDecisionError), a registry that refused. It must not block.
	Failed func(Placement, error)
}

// Scheduler keeps the decisions of its placements written. Make one with New, give it
// placements with Set, and Run it.
type Scheduler struct {
	members multicluster.ChangeSource
	client  cpversioned.Interface
	opts    Options
	// ctrl is controller-runtime's controller of the decisions (its queue, rate limiting,
	// workers, metrics and logs), whose Reconciler s is; queue is its queue as Set, Remove and
	// the members' changes add to it, before it starts too.
	ctrl  controller.TypedController[reconcile.Request]
	queue reconcilequeue.Queue

	mu         sync.Mutex
	placements map[types.NamespacedName]*state
	writes     int64
}

// state is one placement's policy and what was last written for it.
type state struct {
	placement Placement
	// written is the decision last written (or read at the first decision), once known is set.
	written []placement.Choice
	known   bool
	// removed: Remove was called; its slices go at the next turn.
	removed bool
}

// New is a Scheduler of decisions over members (a Fleet, or a shard's View of one), written
// with client.
func New(members multicluster.ChangeSource, client cpversioned.Interface, opts Options) (*Scheduler, error) {
	if opts.SchedulerName == "" {
		return nil, errors.New("scheduler: Options.SchedulerName is required")
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	s := &Scheduler{members: members, client: client, opts: opts, placements: map[types.NamespacedName]*state{}}
	var err error
	// Several Schedulers may run in one process (one per cluster set): the name is not unique.
	if s.ctrl, err = controller.NewTypedUnmanaged("scheduler", controller.TypedOptions[reconcile.Request]{
		Reconciler: s, MaxConcurrentReconciles: opts.Workers, SkipNameValidation: ptr.To(true), Logger: opts.Logger,
	}); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	s.queue.OnStart(func(ctx context.Context) {
		unsubscribe := s.members.Subscribe(func(ev multicluster.MemberEvent) { s.changed(ev.Member.Cluster()) })
		unsubscribeChanges := s.members.SubscribeChanges(func(m *multicluster.Member) { s.changed(m.Cluster()) })
		context.AfterFunc(ctx, func() { unsubscribe(); unsubscribeChanges() })
	})
	if err := s.ctrl.Watch(s.queue.Source()); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return s, nil
}

// Set adds a placement, or changes its policy; it is decided again soon.
func (s *Scheduler) Set(p Placement) {
	s.mu.Lock()
	if st := s.placements[p.Key]; st != nil {
		if !sameOwner(st.placement.Owner, p.Owner) {
			st.known = false // written for another owner (a Placement deleted and made again): write anew
		}
		if st.placement.LastRebalance.After(p.LastRebalance) {
			p.LastRebalance = st.placement.LastRebalance // decided here since that status was read
		}
		st.placement, st.removed = p, false
	} else {
		s.placements[p.Key] = &state{placement: p}
	}
	s.mu.Unlock()
	s.queue.Add(p.Key)
}

// Remove drops a placement; its slices are deleted soon.
func (s *Scheduler) Remove(key types.NamespacedName) {
	s.mu.Lock()
	if st := s.placements[key]; st != nil {
		st.removed = true
	} else {
		// Not decided here (forgotten, as a misconfigured placement is): its slices go all the same.
		s.placements[key] = &state{removed: true}
	}
	s.mu.Unlock()
	s.queue.Add(key)
}

// Forget stops deciding a placement and leaves its slices as they are: it is decided elsewhere
// now (another replica), or its policy cannot be used until it is fixed. Set takes it up again,
// from the decision it then finds written.
func (s *Scheduler) Forget(key types.NamespacedName) {
	s.mu.Lock()
	delete(s.placements, key)
	s.mu.Unlock()
}

func sameOwner(a, b *metav1.OwnerReference) bool {
	return (a == nil) == (b == nil) && (a == nil || a.UID == b.UID)
}

// Writes is how many slices the Scheduler has created, updated or deleted.
func (s *Scheduler) Writes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// Run decides and writes until ctx ends, then waits for its workers.
func (s *Scheduler) Run(ctx context.Context) error {
	// Start returns once ctx ends and the workers have finished what they were doing.
	if err := s.ctrl.Start(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// changed queues the placements a Cluster's change (or coming, or going) may matter to: those of
// its namespace that it is a candidate of, and those whose last decision chose it. Any other is
// left alone: an unrelated Cluster costs it nothing.
func (s *Scheduler) changed(c *v1alpha1.Cluster) {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	s.mu.Lock()
	var affected []types.NamespacedName
	for k, st := range s.placements {
		if k.Namespace != c.Namespace {
			continue
		}
		if st.placement.Policy.Candidate(c) || chose(st.written, key) {
			affected = append(affected, k)
		}
	}
	s.mu.Unlock()
	for _, k := range affected {
		s.queue.Add(k)
	}
}

// sameChoices reports whether two decisions choose the same members, in the same order and
// groups: the reasons aside, which change (Chosen, then Kept) with nothing to tell a reader.
func sameChoices(a, b []placement.Choice) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Cluster != b[i].Cluster || a[i].Group != b[i].Group {
			return false
		}
	}
	return true
}

// writtenReason is a choice's reason as a decision says it: stable while the member stays
// chosen, so that a member kept is not a change to write.
func writtenReason(r placement.Reason) string {
	if r == placement.ReasonKept {
		r = placement.ReasonChosen
	}
	return string(r)
}

func chose(choices []placement.Choice, key types.NamespacedName) bool {
	for _, c := range choices {
		if c.Cluster == key {
			return true
		}
	}
	return false
}

// Reconcile decides the request's placement and writes its decision if it changed, for
// controller-runtime's controller: an error is retried with its rate limit (and told to
// Options.Failed), and a toleration that ends is a RequeueAfter.
func (s *Scheduler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	after, err := s.sync(ctx, req.NamespacedName)
	if err != nil {
		if s.opts.Failed != nil {
			s.mu.Lock()
			st := s.placements[req.NamespacedName]
			s.mu.Unlock()
			if st != nil {
				s.opts.Failed(st.placement, err)
			}
		}
		return reconcile.Result{}, fmt.Errorf("writing the decision of placement %s: %w", req.NamespacedName, err)
	}
	return reconcile.Result{RequeueAfter: max(after, 0)}, nil
}

// remove deletes the decision of key, a placement removed (st), and forgets it unless it was
// Set again meanwhile.
func (s *Scheduler) remove(ctx context.Context, key types.NamespacedName, st *state) error {
	// No decision at all, which a reader tells from an empty one.
	deleted, err := decision.Delete(ctx, s.client, key.Namespace, key.Name, s.opts.SchedulerName)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes += int64(deleted)
	if s.placements[key] == st && st.removed {
		delete(s.placements, key)
	}
	return nil
}

// sync decides key's placement and writes its decision if it changed; after, if positive, is when
// a toleration ends and it must be decided again.
func (s *Scheduler) sync(ctx context.Context, key types.NamespacedName) (after time.Duration, err error) {
	s.mu.Lock()
	st := s.placements[key]
	var pl Placement
	removed := false
	if st != nil {
		pl, removed = st.placement, st.removed // Set changes them under the lock
	}
	s.mu.Unlock()
	if st == nil {
		return 0, nil
	}
	if removed {
		return 0, s.remove(ctx, key, st)
	}
	if s.opts.Fresh != nil && !s.opts.Fresh() {
		return time.Second, nil // not now: a stale or failed list must not change a decision
	}
	s.mu.Lock()
	previous, known := st.written, st.known
	s.mu.Unlock()
	var listed *cpv1alpha1.PlacementDecisionList // the slices, when read here: Write need not list them again
	if !known {
		var err error
		if listed, err = decision.List(ctx, s.client, key.Namespace, key.Name); err != nil {
			return 0, err
		}
		if len(listed.Items) > 0 {
			d := decision.FromSlices(key.Namespace, key.Name, listed.Items)
			for _, c := range d.Clusters {
				previous = append(previous, placement.Choice{Cluster: c, Group: d.Groups[c]})
			}
		}
	}
	in := placement.Input{Key: key.String(), Previous: previous, Now: time.Now(), LastRebalance: pl.LastRebalance}
	for _, m := range s.members.Members() {
		if c := m.Cluster(); c.Namespace == key.Namespace {
			in.Candidates = append(in.Candidates, c)
		}
	}
	d := pl.Policy.Decide(in)
	if !known || !sameChoices(previous, d.Chosen) {
		chosen := make([]decision.Chosen, len(d.Chosen))
		for i, c := range d.Chosen {
			chosen[i] = decision.Chosen{Cluster: c.Cluster, Reason: writtenReason(c.Reason), Group: c.Group}
		}
		w, err := decision.Write(ctx, s.client, key.Namespace, key.Name, chosen, decision.WriteOptions{SchedulerName: s.opts.SchedulerName, Owner: pl.Owner, Existing: listed})
		if err != nil {
			return 0, fmt.Errorf("placement %s: %w", key, err)
		}
		s.mu.Lock()
		s.writes += int64(w.Created + w.Updated + w.Deleted)
		s.mu.Unlock()
	}
	s.mu.Lock()
	st.written, st.known = d.Chosen, true
	if d.Rebalanced {
		at := in.Now.Truncate(time.Second) // as status.lastRebalanceTime says it
		pl.LastRebalance, st.placement.LastRebalance = at, at
	}
	s.mu.Unlock()
	if s.opts.Decided != nil {
		s.opts.Decided(pl, d)
	}
	if !d.RecheckAt.IsZero() {
		return max(time.Until(d.RecheckAt), time.Millisecond), nil
	}
	return 0, nil
}
