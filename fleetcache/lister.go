package fleetcache

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/multicluster"
)

// Item is one object of a fleet-wide list, with the member it is on.
type Item[T runtime.Object] struct {
	Member *multicluster.Member
	Object T
}

// ErrNoSuchMember is wrapped by the lister's errors for a member the Cache does not have (not in
// the Fleet, or the Cache not started).
var ErrNoSuchMember = errors.New("no such member in the cache")

// indexer is the member's cache of the kind, and its status.
func (k *Kind[T]) indexer(member types.NamespacedName) (*multicluster.Member, cache.Indexer, Status, error) {
	mc := k.c.memberCaches(member)
	if mc == nil {
		return nil, nil, Status{}, fmt.Errorf("%s: member %s: %w", k, member, ErrNoSuchMember)
	}
	st := mc.informer(k.id)
	if st == nil {
		return nil, nil, Status{}, fmt.Errorf("%s: member %s: %w", k, member, ErrNoSuchMember)
	}
	inf, status := st.get()
	if inf == nil {
		return mc.member, nil, status, nil
	}
	return mc.member, inf.GetIndexer(), status, nil
}

// Get returns the object of that namespace (empty for a cluster-scoped kind) and name in the
// member's cache, and whether it is there. Check Status to know how current the answer is.
func (k *Kind[T]) Get(member types.NamespacedName, namespace, name string) (T, bool, error) {
	var zero T
	_, idx, _, err := k.indexer(member)
	if err != nil || idx == nil {
		return zero, false, err
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := idx.GetByKey(key)
	if err != nil || !ok {
		return zero, false, err
	}
	o, ok := obj.(T)
	if !ok {
		return zero, false, fmt.Errorf("%s: member %s holds a %T, not a %T", k, member, obj, zero)
	}
	return o, true, nil
}

// List returns the member's objects whose labels match selector (nil matches all), in no
// particular order. The objects are the cache's: do not modify them.
func (k *Kind[T]) List(member types.NamespacedName, selector labels.Selector) ([]T, error) {
	_, idx, _, err := k.indexer(member)
	if err != nil || idx == nil {
		return nil, err
	}
	return filter[T](k, idx.List(), selector)
}

// ListAll returns every member's objects whose labels match selector, each with its member,
// ordered by member. Members whose caches are not synced contribute what they hold; Statuses
// says which those are.
func (k *Kind[T]) ListAll(selector labels.Selector) []Item[T] {
	var out []Item[T]
	for _, mc := range k.c.memberList() {
		st := mc.informer(k.id)
		if st == nil {
			continue
		}
		inf, _ := st.get()
		if inf == nil {
			continue
		}
		objs, _ := filter[T](k, inf.GetIndexer().List(), selector)
		for _, o := range objs {
			out = append(out, Item[T]{Member: mc.member, Object: o})
		}
	}
	return out
}

// ByIndex returns the member's objects whose index value is value; see AddIndexers.
// cache.NamespaceIndex ("namespace") is always there for namespaced kinds.
func (k *Kind[T]) ByIndex(member types.NamespacedName, index, value string) ([]T, error) {
	_, idx, _, err := k.indexer(member)
	if err != nil || idx == nil {
		return nil, err
	}
	objs, err := idx.ByIndex(index, value)
	if err != nil {
		return nil, fmt.Errorf("%s: member %s: %w", k, member, err)
	}
	return filter[T](k, objs, nil)
}

func filter[T runtime.Object](k *Kind[T], objs []any, selector labels.Selector) ([]T, error) {
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		o, ok := obj.(T)
		if !ok {
			var zero T
			return nil, fmt.Errorf("%s holds a %T, not a %T: give Typed the type of its informer", k, obj, zero)
		}
		if selector != nil && !selector.Empty() {
			m, err := meta.Accessor(o)
			if err != nil || !selector.Matches(labels.Set(m.GetLabels())) {
				continue
			}
		}
		out = append(out, o)
	}
	return out, nil
}
