package fleetcache

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Status is how current the member's cache of the kind is; false if the Cache has no such member.
func (k *Kind[T]) Status(member types.NamespacedName) (Status, bool) {
	mc := k.c.memberCaches(member)
	if mc == nil {
		return Status{}, false
	}
	st := mc.informer(k.id)
	if st == nil {
		return Status{}, false
	}
	_, s := st.get()
	return s, true
}

// Statuses is the status of every member's cache of the kind.
func (k *Kind[T]) Statuses() map[types.NamespacedName]Status {
	out := map[types.NamespacedName]Status{}
	for _, mc := range k.c.memberSet() {
		if st := mc.informer(k.id); st != nil {
			_, s := st.get()
			out[mc.member.Name()] = s
		}
	}
	return out
}

// syncPoll is how often WaitForCacheSync looks at the members' caches.
const syncPoll = 50 * time.Millisecond

// WaitForCacheSync waits until every member's cache of the kind has synced, giving each member
// at most perMember from when its cache started (zero: no limit of its own), or until ctx ends.
// A member that is down or slow holds up no other: it is given up on at its deadline. A member
// that refused the list (Forbidden or Unauthorized: the credentials may not list the kind, see
// Status.Refused) is given up on at once, since waiting would not change its answer; its cache
// keeps trying, and syncs if the member's RBAC changes. The error, a *NotSyncedError, names every
// member not synced then, with its status; nil means all synced. Members that join while it waits
// are waited for too.
func (k *Kind[T]) WaitForCacheSync(ctx context.Context, perMember time.Duration) error {
	ticker := time.NewTicker(syncPoll)
	defer ticker.Stop()
	for {
		now := time.Now()
		pending, late := 0, map[types.NamespacedName]Status{}
		for key, s := range k.Statuses() {
			if s.State != Syncing {
				continue
			}
			if s.Refused() || (perMember > 0 && now.Sub(s.Since) >= perMember) {
				late[key] = s
				continue
			}
			pending++
		}
		if pending == 0 || ctx.Err() != nil {
			if ctx.Err() != nil {
				for key, s := range k.Statuses() {
					if s.State == Syncing {
						late[key] = s
					}
				}
			}
			if len(late) == 0 {
				return nil
			}
			return &NotSyncedError{Kind: k.String(), Members: late}
		}
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
	}
}
