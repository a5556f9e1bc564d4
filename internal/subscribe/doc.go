// Package subscribe delivers a source's events to its subscribers: each subscriber's events in
// order, one call at a time, from a goroutine that runs only while its events wait, so that a slow
// subscriber delays itself alone and an idle one holds no goroutine. multicluster.Fleet and
// shard.View deliver their membership events with it.
package subscribe
