package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The feed numbers each change once, replays what came after a kept revision, and says when a
// revision is no longer kept.
func TestFeed(t *testing.T) {
	f := newFeed(3)
	a, b := types.NamespacedName{Namespace: "s", Name: "a"}, types.NamespacedName{Namespace: "s", Name: "b"}
	f.update(map[types.NamespacedName]clusterSummary{a: {Name: "a"}})
	f.update(map[types.NamespacedName]clusterSummary{a: {Name: "a"}}) // no change, no revision
	_, rev, _ := f.snapshot()
	require.EqualValues(t, 1, rev)
	f.update(map[types.NamespacedName]clusterSummary{a: {Name: "a", Ready: "True"}, b: {Name: "b"}})
	f.update(map[types.NamespacedName]clusterSummary{b: {Name: "b"}})

	changes, at, _, ok := f.since(1)
	require.True(t, ok)
	require.EqualValues(t, 4, at)
	var kinds []string
	for _, c := range changes {
		kinds = append(kinds, c.summary.Name+" "+c.kind)
	}
	require.ElementsMatch(t, []string{"a MODIFIED", "b ADDED"}, kinds[:2])
	require.Equal(t, "a DELETED", kinds[2])
	_, _, _, ok = f.since(0) // revision 1 is no longer kept (3 are)
	require.False(t, ok)
	_, _, _, ok = f.since(5)
	require.False(t, ok, "a revision from the future")
	changes, _, _, ok = f.since(4)
	require.True(t, ok)
	require.Empty(t, changes)
}

// realisticSummaries is what summarizeAll makes of n members on every poll: fresh counts (pointers
// to new ints), a message, a cache state with its time. Nothing in it changes between calls.
func realisticSummaries(n int) map[types.NamespacedName]clusterSummary {
	since := time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)
	out := make(map[types.NamespacedName]clusterSummary, n)
	for i := range n {
		name := types.NamespacedName{Namespace: "fleet", Name: fmt.Sprintf("member-%d", i)}
		out[name] = clusterSummary{
			Namespace: name.Namespace, Name: name.Name, DisplayName: "Member " + name.Name,
			Ready: "True", Reason: "Reachable", Version: "v1.36.3", Message: "the API server answers",
			CredentialsExpireAt: "2026-12-01T00:00:00Z",
			Nodes:               nodeCounts{Total: ptr.To(3), Ready: ptr.To(3)},
			Pods:                nodeCounts{Total: ptr.To(i % 11), Ready: ptr.To(i % 3)},
			Workloads:           workloads{Deployments: ptr.To(i % 7), DeploymentsReady: ptr.To(i % 5)},
			Cache:               cacheState{State: "Synced", Since: since},
			Capacity:            &capacitySummary{ReadyNodes: 3, Nodes: 3, CPU: fmt.Sprintf("%dm/12", 100*(i%9)), Memory: "6Gi/48Gi"},
		}
	}
	return out
}

// A poll that finds every member as it was records nothing, though each poll's summaries hold
// counts at new addresses (fleet-api sent every member again every 500 ms: 163 MODIFIED events
// in 24 s for 3 members, 2 of them real); a count that does change is one change.
func TestFeedSendsNothingWhenNothingChanged(t *testing.T) {
	f := newFeed(4096)
	f.update(realisticSummaries(100))
	_, first, _ := f.snapshot()
	for range 5 {
		f.update(realisticSummaries(100))
	}
	_, rev, _ := f.snapshot()
	require.Equal(t, first, rev, "polls that found nothing new were recorded as changes")

	changed := realisticSummaries(100)
	m := changed[types.NamespacedName{Namespace: "fleet", Name: "member-7"}]
	m.Workloads.DeploymentsReady = ptr.To(*m.Workloads.DeploymentsReady + 1)
	changed[types.NamespacedName{Namespace: "fleet", Name: "member-7"}] = m
	f.update(changed)
	changes, _, _, ok := f.since(rev)
	require.True(t, ok)
	require.Len(t, changes, 1)
	require.Equal(t, eventModified, changes[0].kind)
	require.Equal(t, "member-7", changes[0].summary.Name)
}

// same compares every field of a summary: a field it forgot would be a change never sent. Each
// field, changed alone, makes two summaries differ; the same values at other addresses do not.
func TestSummarySameComparesEveryField(t *testing.T) {
	base := realisticSummaries(1)[types.NamespacedName{Namespace: "fleet", Name: "member-0"}]
	copyOf := realisticSummaries(1)[types.NamespacedName{Namespace: "fleet", Name: "member-0"}]
	require.True(t, base.same(copyOf), "the same values at other addresses")
	var visit func(path string, v reflect.Value)
	fields := 0
	visit = func(path string, v reflect.Value) {
		if v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Time]() {
			for i := range v.NumField() {
				visit(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
			return
		}
		fields++
		changed := realisticSummaries(1)[types.NamespacedName{Namespace: "fleet", Name: "member-0"}]
		target := reflect.ValueOf(&changed).Elem().FieldByIndex(fieldIndex(t, reflect.TypeFor[clusterSummary](), path))
		switch target.Kind() {
		case reflect.String:
			target.SetString(target.String() + "x")
		case reflect.Map:
			target.Set(reflect.ValueOf(map[string]string{"added": "by the test"}))
		case reflect.Pointer:
			if target.Type().Elem().Kind() == reflect.Int {
				target.Set(reflect.ValueOf(ptr.To(1000)))
			} else { // a summary of its own (capacity): another one
				target.Set(reflect.New(target.Type().Elem()))
			}
		case reflect.Struct: // time.Time
			target.Set(reflect.ValueOf(target.Interface().(time.Time).Add(time.Second)))
		default:
			t.Fatalf("%s: a field of kind %s: teach this test to change it", path, target.Kind())
		}
		require.False(t, base.same(changed), "%s changed, and same says nothing did", path)
	}
	visit("", reflect.ValueOf(base))
	require.Greater(t, fields, 15)
}

// fieldIndex is the index path of a dotted field path (".Nodes.Total") in typ.
func fieldIndex(t *testing.T, typ reflect.Type, path string) []int {
	var index []int
	for _, name := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		f, ok := typ.FieldByName(name)
		require.True(t, ok, name)
		index = append(index, f.Index...)
		typ = f.Type
	}
	return index
}

// BenchmarkFeedUnchanged is one poll of 10,000 members of which none changed: it must record
// (and so send) 0 events. With the pointer comparison it recorded 10,000 a poll, 20,000 a second.
func BenchmarkFeedUnchanged(b *testing.B) {
	const members = 10000
	f := newFeed(4096)
	f.update(realisticSummaries(members))
	_, start, _ := f.snapshot()
	polls := make([]map[types.NamespacedName]clusterSummary, 4)
	for i := range polls {
		polls[i] = realisticSummaries(members)
	}
	b.ResetTimer()
	for i := range b.N {
		f.update(polls[i%len(polls)])
	}
	b.StopTimer()
	_, end, _ := f.snapshot()
	b.ReportMetric(float64(end-start)/float64(b.N), "events/poll")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/members, "ns/member")
	if end != start {
		b.Fatalf("%d events for polls that found nothing new", end-start)
	}
}
