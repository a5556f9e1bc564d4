package rotation

import (
	"context"
	"time"
)

// RenewDueAt is RenewDue as if it were now.
func RenewDueAt(r *Rotator, ctx context.Context, now time.Time) ([]Renewal, []error) {
	return r.renewDue(ctx, now)
}
