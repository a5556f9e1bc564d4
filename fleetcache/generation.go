package fleetcache

// Generation is a number that grows each time anything the kind's List, Get, ListAll, ByIndex or
// Status may answer differently: an object added, updated or deleted in a member's cache (a
// relist that finds an object unchanged is not a change), a member's cache started or gone, and
// a member's Status changed (synced, stale, failing anew, following again).
//
// It lets a tool that derives an answer from the caches, such as a list a UI polls, compute it
// once per change rather than once per request: read Generation, and if it is the one the kept
// answer was computed at, nothing the answer read has changed. Read it before reading the
// caches: a change made while the answer is computed moves it on, so the answer is computed
// again at the next request, and never kept past a change. The number means nothing across
// processes or Kinds.
func (k *Kind[T]) Generation() uint64 { return k.gen.Load() }
