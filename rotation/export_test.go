package rotation

import (
	"context"
	"time"
)

// RenewDueAt is RenewDue as if it were now.
func RenewDueAt(r *Rotator, ctx context.Context, now time.Time) ([]Renewal, []error) {
	return r.renewDue(ctx, now)
}

// UntilNextPass is how long Run would wait after a pass at now.
func UntilNextPass(r *Rotator, now time.Time) time.Duration { return r.untilNextPass(now) }
