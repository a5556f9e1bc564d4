package delivery

import (
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// lostFields says which fields the Release's field manager no longer holds on a member (another
// writer changed them), from its managed-fields entries as applied and as seen: what a drift
// report names, so that an operator knows what to look at.
func lostFields(applied, seen string) string {
	var was, now fieldpath.Set
	if was.FromJSON(strings.NewReader(applied)) != nil || (seen != "" && now.FromJSON(strings.NewReader(seen)) != nil) {
		return "changed by another writer"
	}
	var paths []string
	was.Difference(&now).Leaves().Iterate(func(p fieldpath.Path) { paths = append(paths, p.String()) })
	switch {
	case len(paths) == 0:
		return "changed by another writer"
	case len(paths) > 5:
		paths = append(paths[:5], fmt.Sprintf("and %d more", len(paths)-5))
	}
	return "changed by another writer: " + strings.Join(paths, ", ")
}

// olderThan: resource version a is older than b. Resource versions are opaque, but every one
// a member's API server gives comes from one etcd revision counter; where either is not a number
// nothing is called older, so that an event is never dropped on a guess.
func olderThan(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}
