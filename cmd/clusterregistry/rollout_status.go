package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// RolloutStatusOptions are rollout status's arguments and flags.
type RolloutStatusOptions struct {
	Watch   bool
	Timeout time.Duration

	releaseTarget
}

func newRolloutStatus(f *factory) *cobra.Command {
	o := &RolloutStatusOptions{Watch: true}
	cmd := &cobra.Command{
		Use:   "status release/NAME [--watch=false] [--timeout DURATION]",
		Short: "Wait for a Release's rollout to finish; exit 1 if it stops or fails",
		Long: `status shows a Release's rollout as it goes, as kubectl rollout status shows a Deployment's: a line
each time the wave or the count of ready members changes, until every member runs the revision,
healthy (exit 0). A rollout that stops (more members failed than maxFailures allows), that every
wave finished with members failed, a source or decision that cannot be read, or a paused Release
(spec.suspend) ends it with exit 1, saying why. --watch=false prints where it stands once;
--timeout gives up waiting (exit 1).`,
		Example: `  # Wait for web's rollout, at most 10 minutes
  clusterregistry rollout status release/web -n fleet --timeout 10m`,
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		RunE:              runOptions(f, o),
		ValidArgsFunction: rolloutCompletion(f),
	}
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", true, "wait until the rollout finishes")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "how long to wait before giving up; 0 waits for good")
	return cmd
}

// Validate refuses a negative timeout.
func (o *RolloutStatusOptions) Validate() error {
	if o.Timeout < 0 {
		return usageError{fmt.Errorf("--timeout %s: want 0 or more", o.Timeout)}
	}
	return nil
}

// errRolloutFailed: the rollout ended without every member ready.
var errRolloutFailed = errors.New("rollout failed")

// errRolloutPaused: the Release is paused; its rollout waits for rollout resume.
var errRolloutPaused = errors.New("resume it with rollout resume")

// Run prints where the rollout stands, and waits as asked.
func (o *RolloutStatusOptions) Run(ctx context.Context) error {
	reg, rel, err := o.release(ctx)
	if err != nil {
		return err
	}
	last := ""
	check := func(rel *v1alpha1.Release) (bool, error) {
		line, done, err := rolloutState(rel)
		if line != last {
			fmt.Fprintln(o.out, printers.EscapeTerminal(line))
			last = line
		}
		return done, err
	}
	if done, err := check(rel); done || err != nil || !o.Watch {
		return err
	}
	interrupted := ctx
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	releases := reg.Clusters.ClusterregistryV1alpha1().Releases(reg.Namespace)
	lw := &fieldWatch{name: o.name, list: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return releases.Watch(ctx, opts)
	}}
	_, err = watchtools.Until(ctx, rel.ResourceVersion, lw, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("release %s/%s was deleted", reg.Namespace, o.name)
		}
		r, ok := ev.Object.(*v1alpha1.Release)
		if !ok {
			return false, nil
		}
		return check(r)
	})
	switch {
	case interrupted.Err() != nil:
		return fmt.Errorf("release %s/%s: interrupted before the rollout finished (it goes on; %s)", reg.Namespace, o.name, last)
	case errors.Is(err, watchtools.ErrWatchClosed) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return fmt.Errorf("release %s/%s: timed out waiting for the rollout to finish", reg.Namespace, o.name)
	}
	return err
}

// fieldWatch watches one Release by name.
type fieldWatch struct {
	name string
	list func(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func (w *fieldWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", w.name).String()
	return w.list(context.Background(), opts)
}

// rolloutState is a Release's rollout in a line, whether it has ended, and the error when it
// ended badly.
func rolloutState(rel *v1alpha1.Release) (line string, done bool, err error) {
	name := fmt.Sprintf("release %q", rel.Name)
	progressing := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ReleaseProgressing)
	stalled := meta.FindStatusCondition(rel.Status.Conditions, v1alpha1.ReleaseStalled)
	switch {
	case rel.Status.ObservedGeneration < rel.Generation || progressing == nil || progressing.ObservedGeneration < rel.Generation:
		return fmt.Sprintf("Waiting for %s rollout to start: the releases controller has not seen generation %d yet...", name, rel.Generation), false, nil
	case stalled != nil && stalled.Status == metav1.ConditionTrue && stalled.Reason == "Suspended":
		// Paused is not failed: say how the members stand, and that nothing failed.
		return fmt.Sprintf("%s is paused (spec.suspend): %d of %d members ready; resume it to go on", name, rel.Status.Ready, rel.Status.Members), true,
			fmt.Errorf("%s is paused, and its rollout waits (nothing failed): %w", name, errRolloutPaused)
	case stalled != nil && stalled.Status == metav1.ConditionTrue:
		return fmt.Sprintf("%s rollout stopped: %s: %s", name, stalled.Reason, stalled.Message), true, fmt.Errorf("%s: %s: %w", name, stalled.Reason, errRolloutFailed)
	case progressing.Reason == "AwaitingApproval":
		return fmt.Sprintf("Waiting for %s rollout: %s", name, progressing.Message), false, nil
	case progressing.Status == metav1.ConditionFalse && progressing.Reason == "Complete":
		return fmt.Sprintf("%s successfully rolled out: revision %s, %d of %d members ready", name, rel.Status.Revision, rel.Status.Ready, rel.Status.Members), true, nil
	case progressing.Status == metav1.ConditionFalse:
		return fmt.Sprintf("%s rollout finished with members not ready: %s", name, progressing.Message), true, fmt.Errorf("%s: %s: %w", name, progressing.Reason, errRolloutFailed)
	}
	return fmt.Sprintf("Waiting for %s rollout to finish: wave %d of %d, %d of %d members ready...", name, rel.Status.Wave, rel.Status.Waves, rel.Status.Ready, rel.Status.Members), false, nil
}
