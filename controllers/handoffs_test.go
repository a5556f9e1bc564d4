package controllers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// A large handoff is two lines, naming the first members and counting the rest; nothing is
// logged when nothing moved.
func TestHandoffLogGathersMoves(t *testing.T) {
	var lines []string
	h := &handoffLog{log: funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})}
	h.flush()
	require.Empty(t, lines, "a line with nothing moved")
	var clusters []v1alpha1.Cluster
	for i := range 25 {
		c := v1alpha1.Cluster{}
		c.Namespace, c.Name = "fleet", fmt.Sprintf("m%02d", i)
		clusters = append(clusters, c)
	}
	members := multicluster.MembersOf(nil, clusters, multicluster.FleetOptions{})
	for i, m := range members {
		ev := multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m}
		if i%5 == 0 {
			ev.Type = multicluster.MemberRemoved
		}
		h.observe(ev)
	}
	h.flush()
	require.Len(t, lines, 2, "%q", lines)
	require.Contains(t, lines[0], `"count"=20`)
	require.Contains(t, lines[0], "fleet/m01, fleet/m02, fleet/m03, fleet/m04, fleet/m06")
	require.Contains(t, lines[0], " and 10 more")
	require.Contains(t, lines[1], `"count"=5`)
	require.Equal(t, 4, strings.Count(lines[1], ", "), "%s", lines[1])
	lines = nil
	h.flush()
	require.Empty(t, lines, "moves logged twice")
}
