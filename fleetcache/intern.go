package fleetcache

import (
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// internMeta makes the strings of an object's metadata that repeat across objects and members
// (namespace, label and annotation keys and values, owners' kinds, finalizers, the type of a
// metadata-only object; each at most internedMax bytes) share one copy each. A decoder allocates every
// string of every object anew: across a fleet, "app.kubernetes.io/name" or a namespace's name is
// held once per object per member. Names, UIDs and resourceVersions are left alone: they rarely
// repeat, and interning them would cost without saving.
//
// Only typed and metadata-only objects are interned; an unstructured object's metadata is a map
// of interfaces that its accessors copy, which would cost more than it saves.
func internMeta(obj any) {
	if pm, ok := obj.(*metav1.PartialObjectMetadata); ok {
		pm.APIVersion, pm.Kind = intern(pm.APIVersion), intern(pm.Kind)
	}
	acc, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return
	}
	m, ok := acc.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok || m == nil {
		return
	}
	m.Namespace = intern(m.Namespace)
	m.GenerateName = intern(m.GenerateName)
	m.Labels = internMap(m.Labels)
	m.Annotations = internMap(m.Annotations)
	for i := range m.OwnerReferences {
		o := &m.OwnerReferences[i]
		o.APIVersion, o.Kind = intern(o.APIVersion), intern(o.Kind)
	}
	for i, f := range m.Finalizers {
		m.Finalizers[i] = intern(f)
	}
}

// internedMax is the longest string interned: short ones (an app's name, "true") repeat; long
// ones (a last-applied configuration) are each their own.
const internedMax = 64

// internMap is m with interned keys and short values, in a map of the same size.
func internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}

// interned is the table of canonical strings, shared by every cache of the process so that its
// size is paid once, not per member. It is bounded: past internedEntries it starts again empty
// (strings already shared stay shared), so churning values (a pod-template-hash) cannot grow it
// without end.
var interned struct {
	table   atomic.Pointer[sync.Map]
	entries atomic.Int64
}

const internedEntries = 1 << 16

// intern is s's canonical copy: the first equal string the table was given, cloned so that it
// does not keep the decoder's buffer alive.
func intern(s string) string {
	if s == "" || len(s) > internedMax {
		return s
	}
	table := interned.table.Load()
	if table == nil {
		interned.table.CompareAndSwap(nil, &sync.Map{})
		table = interned.table.Load()
	}
	if v, ok := table.Load(s); ok {
		return v.(string)
	}
	if interned.entries.Add(1) > internedEntries {
		interned.entries.Store(0)
		interned.table.Store(&sync.Map{})
	}
	s = strings.Clone(s)
	v, _ := table.LoadOrStore(s, s)
	return v.(string)
}
