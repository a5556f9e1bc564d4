package decision

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	cpinformers "sigs.k8s.io/cluster-inventory-api/client/informers/externalversions"

	"github.com/cluster-registry/sdk/internal/subscribe"
	"github.com/cluster-registry/sdk/multicluster"
)

// View is the members of a Fleet that one decision chooses, live: a multicluster.MemberSource,
// so that a fan-out (View.Members), fleetcache.New or mcprovider.New given it work on the placed
// members alone. It follows the decision's slices (whoever writes them) and the Fleet: a member
// the decision comes to choose is MemberAdded, one it drops (or that leaves the Fleet)
// MemberRemoved. Until the slices are first listed it chooses nothing, and a reference to
// another namespace's ClusterProfile is never followed (see Decision.Refused).
type View struct {
	fleet     multicluster.MemberSource
	client    cpversioned.Interface
	namespace string
	key       string
	log       logr.Logger

	mu      sync.Mutex
	all     map[types.NamespacedName]*multicluster.Member // the Fleet's
	decided map[types.NamespacedName]bool                 // the decision's
	chosen  map[types.NamespacedName]*multicluster.Member // both
	subs    subscribe.List[multicluster.MemberEvent]
}

// ViewOptions configure a View.
type ViewOptions struct {
	// Logger hears of references the View refuses to follow; discarded when unset.
	Logger logr.Logger
}

// NewView is the members of fleet that the decision of key in namespace chooses. Run it (it
// follows both) after starting the Fleet.
func NewView(fleet multicluster.MemberSource, client cpversioned.Interface, namespace, key string, opts ViewOptions) *View {
	v := &View{fleet: fleet, client: client, namespace: namespace, key: key, log: opts.Logger,
		all: map[types.NamespacedName]*multicluster.Member{}, decided: map[types.NamespacedName]bool{},
		chosen: map[types.NamespacedName]*multicluster.Member{}}
	if v.log.GetSink() == nil {
		v.log = logr.Discard()
	}
	return v
}

// Members is the chosen members now, ordered by cluster set and name.
func (v *View) Members() []*multicluster.Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	return sortedMembers(v.chosen)
}

// Subscribe calls fn with MemberAdded for each member chosen now, then with each change (a
// MemberReachChanged of a chosen member included), in order, one call at a time, until
// unsubscribe.
func (v *View) Subscribe(fn func(multicluster.MemberEvent)) (unsubscribe func()) {
	v.mu.Lock()
	var initial []multicluster.MemberEvent
	for _, m := range sortedMembers(v.chosen) {
		initial = append(initial, multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
	}
	q := v.subs.Add(fn, initial...)
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		v.subs.Remove(q)
		v.mu.Unlock()
		q.Stop()
	}
}

// Run follows the decision and the Fleet until ctx ends; then the view chooses nothing, and says
// so. It returns an error at once if the decision's slices cannot be listed.
func (v *View) Run(ctx context.Context) error {
	selector := labels.SelectorFromSet(labels.Set{cpv1alpha1.DecisionKeyLabel: v.key}).String()
	factory := cpinformers.NewSharedInformerFactoryWithOptions(v.client, 0, cpinformers.WithNamespace(v.namespace),
		cpinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	informer := factory.Apis().V1alpha1().PlacementDecisions()
	lister := informer.Lister()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		return err
	}
	// Listed once first, so that a registry that refuses is an error, not an empty decision.
	if _, err := v.client.ApisV1alpha1().PlacementDecisions(v.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1}); err != nil {
		return fmt.Errorf("decision %s in namespace %s: listing its PlacementDecisions: %w", v.key, v.namespace, err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return nil // ctx ended
	}
	unsubscribe := v.fleet.Subscribe(v.onFleet)
	defer unsubscribe()
	poke(nil)
	for {
		select {
		case <-ctx.Done():
			v.mu.Lock()
			v.decided = map[types.NamespacedName]bool{}
			v.reconcileLocked()
			v.mu.Unlock()
			return nil
		case <-changed:
			items, err := lister.PlacementDecisions(v.namespace).List(labels.Everything())
			if err != nil {
				return err
			}
			pds := make([]cpv1alpha1.PlacementDecision, len(items))
			for i, pd := range items {
				pds[i] = *pd
			}
			d := FromSlices(v.namespace, v.key, pds)
			if len(d.Refused) > 0 {
				v.log.Info("a placement decision names ClusterProfiles of another namespace; they are not followed",
					"namespace", v.namespace, "decisionKey", v.key, "refused", len(d.Refused))
			}
			v.mu.Lock()
			v.decided = map[types.NamespacedName]bool{}
			for _, c := range d.Clusters {
				v.decided[c] = true
			}
			v.reconcileLocked()
			v.mu.Unlock()
		}
	}
}

// onFleet follows the Fleet's membership.
func (v *View) onFleet(ev multicluster.MemberEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := ev.Member.Name()
	switch ev.Type {
	case multicluster.MemberAdded:
		v.all[key] = ev.Member
	case multicluster.MemberRemoved:
		delete(v.all, key)
	case multicluster.MemberReachChanged:
		if v.chosen[key] == ev.Member {
			v.subs.Send(ev)
		}
		return
	}
	v.reconcileLocked()
}

// reconcileLocked chooses the Fleet's members that the decision names, and publishes the
// difference. v.mu is held.
func (v *View) reconcileLocked() {
	for key, m := range v.chosen {
		if !v.decided[key] || v.all[key] != m {
			delete(v.chosen, key)
			v.subs.Send(multicluster.MemberEvent{Type: multicluster.MemberRemoved, Member: m})
		}
	}
	for _, m := range sortedMembers(v.all) {
		key := m.Name()
		if _, ok := v.chosen[key]; !ok && v.decided[key] {
			v.chosen[key] = m
			v.subs.Send(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
		}
	}
}

func sortedMembers(ms map[types.NamespacedName]*multicluster.Member) []*multicluster.Member {
	out := make([]*multicluster.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *multicluster.Member) int { return strings.Compare(a.String(), b.String()) })
	return out
}

var _ multicluster.MemberSource = (*View)(nil)
