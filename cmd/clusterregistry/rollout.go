package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/rollout"
)

var rolloutLong = `rollout manages a Release's rollouts as kubectl rollout manages a Deployment's: its history of
revisions (each recorded by the releases controller, with when its waves ran), undo to an earlier
one, the status of the rollout in progress, pause and resume (spec.suspend), and restart (deliver
again now, to every member whose wave has begun), and approve (let the next wave begin, when the
rollout's approval is Manual).

A Release is named release/NAME (or releases/NAME, release.clusterregistry.k8s.io/NAME, or
"release NAME"), in -n's cluster set.`

func newRollout(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout SUBCOMMAND release/NAME",
		Short: "Manage a Release's rollouts: history, undo, status, pause, resume, restart, approve",
		Long:  rolloutLong,
		Example: `  # What web rolled out, and when
  clusterregistry rollout history release/web -n fleet

  # Wait for its rollout to finish (exit 1 if it stops)
  clusterregistry rollout status release/web -n fleet`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newRolloutHistory(f), newRolloutUndo(f), newRolloutStatus(f), newRolloutPause(f, true), newRolloutPause(f, false), newRolloutRestart(f), newRolloutApprove(f))
	return cmd
}

// releaseArg reads a rollout subcommand's Release argument: release/NAME, its other spellings,
// or "release NAME".
func releaseArg(args []string) (string, error) {
	var kind, name string
	switch len(args) {
	case 1:
		var ok bool
		if kind, name, ok = strings.Cut(args[0], "/"); !ok {
			return "", usageError{fmt.Errorf("%q: name the Release as release/NAME", args[0])}
		}
	case 2:
		kind, name = args[0], args[1]
	default:
		return "", usageError{errors.New("one Release is required: release/NAME")}
	}
	switch kind {
	case "release", "releases", "release.clusterregistry.k8s.io", "releases.clusterregistry.k8s.io", "rrel":
	default:
		return "", usageError{fmt.Errorf("%q: rollout manages Releases only (release/NAME)", kind)}
	}
	if name == "" {
		return "", usageError{errors.New("the Release's name is empty: release/NAME")}
	}
	return name, nil
}

// releaseRef is how a Release is named in rollout's output, as kubectl names a Deployment.
func releaseRef(name string) string { return rollout.Ref(name) }

// rolloutCompletion completes a rollout subcommand's argument with the set's Releases.
func rolloutCompletion(f *factory) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range releaseNames(f) {
			out = append(out, "release/"+n)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// getRelease reads Release name of the registry's -n, saying when the cluster set itself is missing.
func getRelease(ctx context.Context, reg *registry, name string) (*v1alpha1.Release, error) {
	rel, err := reg.Clusters.ClusterregistryV1alpha1().Releases(reg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if err := reg.ClusterSetExists(ctx, reg.Namespace); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, fmt.Errorf("release %s/%s: %w", reg.Namespace, name, err)
	}
	return rel, nil
}

// releaseError is err of a rollout verb on Release name, saying so when the cluster set itself
// is missing rather than the Release.
func releaseError(ctx context.Context, reg *registry, name string, err error) error {
	if apierrors.IsNotFound(err) {
		if missing := reg.ClusterSetExists(ctx, reg.Namespace); missing != nil {
			return missing
		}
	}
	return err
}

// releaseTarget is what every rollout subcommand's Options hold: the Release it acts on, and
// where it writes. Its Complete takes them.
type releaseTarget struct {
	name    string
	factory *factory
	out     io.Writer
}

// Complete takes the Release.
func (o *releaseTarget) Complete(f *factory, cmd *cobra.Command, args []string) error {
	var err error
	o.name, err = releaseArg(args)
	o.factory, o.out = f, cmd.OutOrStdout()
	return err
}

// release reads the registry's client and the Release.
func (o *releaseTarget) release(ctx context.Context) (*registry, *v1alpha1.Release, error) {
	reg, err := o.factory.Registry()
	if err != nil {
		return nil, nil, err
	}
	rel, err := getRelease(ctx, reg, o.name)
	return reg, rel, err
}
