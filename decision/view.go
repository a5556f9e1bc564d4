package decision

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	cpinformers "sigs.k8s.io/cluster-inventory-api/client/informers/externalversions"

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
	subset    *multicluster.Subset
}

// ViewOptions configure a View.
type ViewOptions struct {
	// Logger hears of references the View refuses to follow; discarded when unset.
	Logger logr.Logger
}

// NewView is the members of fleet that the decision of key in namespace chooses. Run it (it
// follows both) after starting the Fleet.
func NewView(fleet multicluster.MemberSource, client cpversioned.Interface, namespace, key string, opts ViewOptions) *View {
	v := &View{fleet: fleet, client: client, namespace: namespace, key: key, log: opts.Logger, subset: multicluster.NewSubset()}
	if v.log.GetSink() == nil {
		v.log = logr.Discard()
	}
	return v
}

// Members is the chosen members now, ordered by cluster set and name.
func (v *View) Members() []*multicluster.Member { return v.subset.Members() }

// Subscribe calls fn with MemberAdded for each member chosen now, then with each change (a
// MemberReachChanged of a chosen member included), in order, one call at a time, until
// unsubscribe.
func (v *View) Subscribe(fn func(multicluster.MemberEvent)) (unsubscribe func()) {
	return v.subset.Subscribe(fn)
}

// SubscribeChanges calls fn with a chosen member each time its Cluster changes (see
// multicluster.ChangeSource), in order, one call at a time, until unsubscribe; never when the
// View's Fleet does not tell of changes.
func (v *View) SubscribeChanges(fn func(*multicluster.Member)) (unsubscribe func()) {
	return v.subset.SubscribeChanges(fn)
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
	stop := v.subset.Follow(v.fleet) // chooses nothing until the decision is read
	defer stop()
	poke(nil)
	for {
		select {
		case <-ctx.Done():
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
			decided := make(map[types.NamespacedName]bool, len(d.Clusters))
			for _, c := range d.Clusters {
				decided[c] = true
			}
			v.subset.Keep(func(key types.NamespacedName) bool { return decided[key] })
		}
	}
}

var _ multicluster.ChangeSource = (*View)(nil)
