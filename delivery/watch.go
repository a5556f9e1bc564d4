package delivery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/fleetcache"
)

// The watch of what the Releases applied: which members and kinds are watched, and what a
// member's event says of an applied object's health and drift.

// rewatch makes the watch caches' members those that any Release has objects on.
func (c *Controller) rewatch() {
	c.mu.Lock()
	keep := map[types.NamespacedName]bool{}
	for _, st := range c.releases {
		for m := range st.members {
			keep[m] = true
		}
	}
	c.mu.Unlock()
	old := *c.keep.Load()
	if mapsEqual(old, keep) {
		return
	}
	c.keep.Store(&keep)
	c.watched.Keep(func(k types.NamespacedName) bool { return (*c.keep.Load())[k] })
}

func mapsEqual(a, b map[types.NamespacedName]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// watchKind starts the watch of a resource's Release objects on the watched members, once.
func (c *Controller) watchKind(gvr schema.GroupVersionResource) {
	c.mu.Lock()
	if _, started := c.kinds[gvr]; started {
		c.mu.Unlock()
		return
	}
	c.kinds[gvr] = nil
	c.mu.Unlock()
	kind, err := fleetcache.Dynamic(c.cache, gvr, fleetcache.KindOptions{LabelSelector: v1alpha1.ReleaseNamespaceLabel, KeepManagedFields: true})
	if err == nil {
		err = kind.AddEventHandler(func(ev fleetcache.Event[*unstructured.Unstructured]) { c.onObject(gvr, ev) })
	}
	if err != nil {
		c.log.Error(err, "watching what releases applied", "resource", gvr.String())
		return
	}
	c.mu.Lock()
	c.kinds[gvr] = kind
	c.mu.Unlock()
}

// kind is the watch cache of a resource's Release objects; nil when it is not watched.
func (c *Controller) kind(gvr schema.GroupVersionResource) *fleetcache.Kind[*unstructured.Unstructured] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kinds[gvr]
}

// deafened are the Controllers that drop their members' watch events, as a watch that missed
// them would: the tests' seam (export_test.go), kept out of the Controller. deafCount keeps the
// map off an event's path while no Controller is deaf, which is always outside the tests.
var (
	deafened  sync.Map // *Controller → struct{}
	deafCount atomic.Int32
)

// deaf says whether c drops its members' watch events.
func deaf(c *Controller) bool {
	if deafCount.Load() == 0 {
		return false
	}
	_, ok := deafened.Load(c)
	return ok
}

// onObject learns an applied object's health, and any drift, from a member's watch.
func (c *Controller) onObject(gvr schema.GroupVersionResource, ev fleetcache.Event[*unstructured.Unstructured]) {
	if deaf(c) {
		return
	}
	obj := ev.Object
	l := obj.GetLabels()
	member := ev.Member.Name()
	// A Release reaches only its own cluster set's members: an object there labelled with
	// another set's Release is not this one's.
	if l[v1alpha1.ReleaseNamespaceLabel] != member.Namespace {
		return
	}
	key := types.NamespacedName{Namespace: member.Namespace, Name: l[v1alpha1.ReleaseLabel]}
	r := ref{GVR: gvr, Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
	c.mu.Lock()
	st := c.releases[key]
	var changed bool
	if st != nil {
		if ms := st.members[member]; ms != nil {
			if ms.applying {
				ms.during = append(ms.during, watched{r: r, deleted: ev.Type == fleetcache.Deleted, obj: obj})
			} else if a := ms.objects[r]; a != nil {
				changed = c.observe(key, ms, a, ev.Type == fleetcache.Deleted, obj)
			}
		}
	}
	c.mu.Unlock()
	if changed {
		c.queue.Add(key)
	}
}

// watched is one event of a member's watch, kept while the member is being applied to.
type watched struct {
	r       ref
	deleted bool
	obj     *unstructured.Unstructured
}

// observe updates an applied object from the member's watch, with c.mu held; it reports whether
// anything the Release's status or delivery depends on changed. An event of another incarnation
// of the object (deleted before the apply made it again), or older than the apply's answer,
// says nothing of it. Any later copy is judged, whatever revision its labels name: an older
// revision's copy put back (a restore from backup, an exported manifest applied again) is drift.
func (c *Controller) observe(key types.NamespacedName, ms *memberState, a *applied, deleted bool, obj *unstructured.Unstructured) bool {
	if a.uid != "" && obj.GetUID() != a.uid {
		return false
	}
	defer ms.settle(time.Now())
	if deleted {
		if a.gone {
			return false
		}
		a.gone, ms.drifted = true, true
		ms.drift = a.ref.String() + " was deleted on the member"
		return true
	}
	if olderThan(obj.GetResourceVersion(), a.resourceVersion) {
		return false // the watch is behind the apply's answer
	}
	var rules objectRules
	if st := c.releases[key]; st != nil {
		rules = st.rules
	}
	status, msg := rules.health.judge(obj)
	fb := readFeedback(rules.feedback, obj)
	changed := status != a.status || msg != a.message || a.gone || !maps.Equal(fb, a.feedback)
	a.status, a.message, a.gone, a.feedback = status, msg, false, fb
	if ms.drifted {
		return changed
	}
	if rev := obj.GetLabels()[v1alpha1.RevisionLabel]; rev != ms.revision {
		ms.drifted, ms.drift = true, fmt.Sprintf("%s carries revision %q's copy, not revision %s's", a.ref, rev, ms.revision)
		return true
	}
	if f := managerFields(obj, c.fieldManager(key)); a.fields != "" && f != a.fields {
		ms.drifted, ms.drift = true, a.ref.String()+": "+lostFields(a.fields, f)
		return true
	}
	return changed
}

func describe(u *unstructured.Unstructured, r ref) string {
	if r.Name != "" {
		return r.String()
	}
	ns := u.GetNamespace()
	if ns != "" {
		ns += "/"
	}
	return fmt.Sprintf("%s %s%s", u.GroupVersionKind().GroupKind(), ns, u.GetName())
}

func isNoMatchOrDiscovery(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || errors.Is(err, context.DeadlineExceeded))
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not an object", obj)
	}
	return m, nil
}
