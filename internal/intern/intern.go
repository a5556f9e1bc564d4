package intern

import (
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Meta makes the strings of an object's metadata that repeat across objects and members
// (namespace, label and annotation keys and values, owners' kinds, finalizers, the type of a
// metadata-only object; each at most maxLen bytes) share one copy each. Names, UIDs and
// resourceVersions are left alone: they rarely repeat, and interning them would cost without
// saving.
//
// Only typed and metadata-only objects are interned; an unstructured object's metadata is a map
// of interfaces that its accessors copy, which would cost more than it saves.
func Meta(obj any) {
	if pm, ok := obj.(*metav1.PartialObjectMetadata); ok {
		pm.APIVersion, pm.Kind = String(pm.APIVersion), String(pm.Kind)
	}
	acc, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return
	}
	m, ok := acc.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok || m == nil {
		return
	}
	m.Namespace = String(m.Namespace)
	m.GenerateName = String(m.GenerateName)
	m.Labels = stringMap(m.Labels)
	m.Annotations = stringMap(m.Annotations)
	for i := range m.OwnerReferences {
		o := &m.OwnerReferences[i]
		o.APIVersion, o.Kind = String(o.APIVersion), String(o.Kind)
	}
	for i, f := range m.Finalizers {
		m.Finalizers[i] = String(f)
	}
}

// maxLen is the longest string interned: short ones (an app's name, "true") repeat; long
// ones (a last-applied configuration) are each their own.
const maxLen = 64

// stringMap is m with interned keys and short values, in a map of the same size.
func stringMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[String(k)] = String(v)
	}
	return out
}

// interned is the table of canonical strings, shared by every cache of the process so that its
// size is paid once, not per member. It is bounded: past maxEntries it starts again empty
// (strings already shared stay shared), so churning values (a pod-template-hash) cannot grow it
// without end.
var interned struct {
	table   atomic.Pointer[sync.Map]
	entries atomic.Int64
}

const maxEntries = 1 << 16

// String is s's canonical copy: the first equal string the table was given, cloned so that it
// does not keep the decoder's buffer alive.
func String(s string) string {
	if s == "" || len(s) > maxLen {
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
	if interned.entries.Add(1) > maxEntries {
		interned.entries.Store(0)
		interned.table.Store(&sync.Map{})
	}
	s = strings.Clone(s)
	v, _ := table.LoadOrStore(s, s)
	return v.(string)
}
