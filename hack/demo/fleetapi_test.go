package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Each poll of GET /clusters is read afresh: a member whose caches were Stale with an error, then
// Synced (the error left out of the answer), shows no error. Read into the last poll's list, the
// old error stayed beside "Synced".
func TestEachPollIsReadAfresh(t *testing.T) {
	stale := []byte(`{"clusters":[{"name":"member-2","cache":{"state":"Stale","error":"connect: connection refused"}}]}`)
	synced := []byte(`{"clusters":[{"name":"member-2","cache":{"state":"Synced"}}]}`)
	list, err := decodeClusters(stale)
	require.NoError(t, err)
	require.Equal(t, "connect: connection refused", list.Clusters[0].Cache.Error)
	list, err = decodeClusters(synced)
	require.NoError(t, err)
	require.Equal(t, "Synced", list.Clusters[0].Cache.State)
	require.Empty(t, list.Clusters[0].Cache.Error, "the last poll's error beside Synced")
}
