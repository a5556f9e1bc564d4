package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Rewrites within the window count; over the limit the object is held, once the hold ends it is
// free again with a fresh count, and rewrites older than the window are forgotten.
func TestChurn(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newChurn(3, 10*time.Second, time.Minute)
	c.now = func() time.Time { return now }
	for i := 1; i <= 3; i++ {
		n, hold := c.wrote("a")
		require.Equal(t, i, n)
		require.False(t, hold)
		now = now.Add(time.Second)
	}
	_, held := c.held("a")
	require.False(t, held)
	n, hold := c.wrote("a")
	require.Equal(t, 4, n)
	require.True(t, hold)
	until, held := c.held("a")
	require.True(t, held)
	require.Equal(t, now.Add(time.Minute), until)
	_, held = c.held("b")
	require.False(t, held, "another object was held")

	now = now.Add(time.Minute)
	_, held = c.held("a")
	require.False(t, held, "the hold did not end")
	n, _ = c.wrote("a")
	require.Equal(t, 1, n, "the count did not start again after the hold")

	// Spread out, rewrites never add up to a hold.
	for range 10 {
		now = now.Add(11 * time.Second)
		_, hold := c.wrote("b")
		require.False(t, hold)
	}
	c.forget("a")
	n, _ = c.wrote("a")
	require.Equal(t, 1, n)
}
