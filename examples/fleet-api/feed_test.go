package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
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
