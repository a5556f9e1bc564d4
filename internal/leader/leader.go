package leader

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lease is the Lease replicas contend for and how; every field is required.
type Lease struct {
	Namespace, Name, Identity                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// ErrLost is Run's error when this replica led and could no longer renew the Lease.
var ErrLost = errors.New("lost the leader election")

// Run waits to hold the Lease, then runs fn with a context that ends when the lead is lost, and
// returns fn's error; ErrLost if the lead was lost; ctx's error if ctx ended first. onLead, if
// set, is called when this replica starts leading.
func Run(ctx context.Context, client coordinationv1.LeasesGetter, l Lease, onLead func(), fn func(context.Context) error) error {
	// The elector calls OnStartedLeading in a goroutine of its own and cancels its context when
	// the lead is lost; done carries fn's error back once it has returned.
	done := make(chan error, 1)
	var started atomic.Bool
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
			Client:     client,
			LockConfig: resourcelock.ResourceLockConfig{Identity: l.Identity},
		},
		LeaseDuration:   l.LeaseDuration,
		RenewDeadline:   l.RenewDeadline,
		RetryPeriod:     l.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            l.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				started.Store(true)
				if onLead != nil {
					onLead()
				}
				done <- fn(ctx)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	elector.Run(ctx) // returns when ctx ends or the lead is lost
	if !started.Load() {
		// Either this replica never led, or it won just now and its goroutine has yet to begin:
		// the elector does not say which, so give that goroutine a moment.
		select {
		case err = <-done:
		case <-time.After(l.RetryPeriod):
			return ctx.Err()
		}
	} else {
		err = <-done
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.Canceled):
		return ErrLost
	}
	return err
}
