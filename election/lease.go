package election

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lease names the Lease in the registry that replicas contend for, and how they do. Namespace
// and Name are required (a controller of the SDK fills in its own Name); Defaulted fills in the
// rest.
type Lease struct {
	// Namespace and Name of the Lease object.
	Namespace, Name string
	// Identity of this replica; default the host name and a random suffix.
	Identity string
	// LeaseDuration is how long a leader's claim stands without renewal: how long a replica that
	// died silently delays the next one. Default 15s. A leader that stops releases the Lease,
	// and the next one takes over at its next retry.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it gives up and stops
	// acting. Default 10s.
	RenewDeadline time.Duration
	// RetryPeriod is how often replicas try to acquire or renew. Default 2s.
	RetryPeriod time.Duration
}

// Defaulted is l with its zero fields set: Identity the host name and a random suffix, and
// client-go's usual 15s, 10s and 2s.
func (l Lease) Defaulted() Lease {
	if l.Identity == "" {
		host, _ := os.Hostname()
		l.Identity = host + "-" + rand.Text()[:8]
	}
	l.LeaseDuration = cmp.Or(l.LeaseDuration, 15*time.Second)
	l.RenewDeadline = cmp.Or(l.RenewDeadline, 10*time.Second)
	l.RetryPeriod = cmp.Or(l.RetryPeriod, 2*time.Second)
	return l
}

// Validate checks a Defaulted Lease: the names are set and RetryPeriod < RenewDeadline <
// LeaseDuration, as client-go's elector needs. Its errors name the field.
func (l Lease) Validate() error {
	var errs []error
	if l.Namespace == "" {
		errs = append(errs, errors.New("field Namespace is required"))
	}
	if l.Name == "" {
		errs = append(errs, errors.New("field Name is required"))
	}
	if !(l.RetryPeriod < l.RenewDeadline && l.RenewDeadline < l.LeaseDuration) {
		errs = append(errs, fmt.Errorf("want RetryPeriod (%s) < RenewDeadline (%s) < LeaseDuration (%s)",
			l.RetryPeriod, l.RenewDeadline, l.LeaseDuration))
	}
	return errors.Join(errs...)
}

// ErrLostLeadership is Run's error when this replica led and could no longer renew the Lease:
// another replica may act now, so this one stopped. Restart to contend again.
var ErrLostLeadership = errors.New("lost the leader election")

// Run waits to hold the Lease (Defaulted), then runs fn with a context that ends when the lead is
// lost, and returns fn's error; ErrLostLeadership if the lead was lost; ctx's error if ctx ended
// first. It logs when this replica starts leading, and gives the Lease up when ctx ends.
func Run(ctx context.Context, client coordinationv1.LeasesGetter, l Lease, log logr.Logger, fn func(context.Context) error) error {
	l = l.Defaulted()
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
				log.Info("leading", "lease", l.Namespace+"/"+l.Name, "identity", l.Identity)
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
		return ErrLostLeadership
	}
	return err
}
