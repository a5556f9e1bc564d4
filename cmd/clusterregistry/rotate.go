package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/trustflags"
)

// RotateOptions are rotate's flags and what Complete makes of them: Complete fills in, Validate
// checks without servers, Run renews until interrupted, or once.
type RotateOptions struct {
	AllNamespaces             bool
	Selector                  string
	Once                      bool
	Interval                  time.Duration
	MemberTimeout             time.Duration
	RenewAt                   float64
	Trust                     trustflags.Flags
	LeaderElect               bool
	LeaseNamespace, LeaseName string

	selector labels.Selector
	factory  *factory
	out      io.Writer
	stderr   io.Writer
}

// Complete parses the selector.
func (o *RotateOptions) Complete(f *factory, cmd *cobra.Command, _ []string) error {
	o.factory, o.out, o.stderr = f, cmd.OutOrStdout(), cmd.ErrOrStderr()
	var err error
	if o.selector, err = labels.Parse(o.Selector); err != nil {
		return usageError{fmt.Errorf("-l/--selector: %w", err)}
	}
	return nil
}

// Validate refuses values out of range and flags that contradict each other.
func (o *RotateOptions) Validate() error {
	switch {
	case o.Interval <= 0:
		return usageError{fmt.Errorf("--interval %s: want a positive duration", o.Interval)}
	case o.MemberTimeout <= 0:
		return usageError{fmt.Errorf("--member-timeout %s: want a positive duration", o.MemberTimeout)}
	case o.RenewAt <= 0 || o.RenewAt >= 1:
		return usageError{fmt.Errorf("--renew-at %v: want a fraction of a token's life between 0 and 1", o.RenewAt)}
	case o.Once && o.LeaderElect:
		return usageError{errors.New("--once and --leader-elect conflict: a single pass takes no turns")}
	case o.LeaderElect && o.AllNamespaces && o.LeaseNamespace == "":
		return usageError{errors.New("--leader-elect with -A needs --leader-elect-namespace")}
	}
	return nil
}

// Run renews what is due: once, saying what it renewed, or every --interval until ctx ends.
func (o *RotateOptions) Run(ctx context.Context) error {
	if _, err := o.Trust.ResolverOptions(); err != nil {
		return usageError{err}
	}
	logger := commandLogger(o.stderr, false) // before anything logs
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	resolver, err := o.Trust.ToResolver(reg.Kube, "clusterregistry-rotate")
	if err != nil {
		return err
	}
	var namespaces []string
	if !o.AllNamespaces {
		if err := reg.ClusterSetExists(ctx, reg.Namespace); err != nil {
			return err
		}
		namespaces = []string{reg.Namespace}
	}
	fleet := multicluster.NewFleet(reg.Clusters, resolver, multicluster.FleetOptions{Namespaces: namespaces, Selector: o.selector})
	if err := fleet.Start(ctx); err != nil {
		return err
	}
	defer fleet.Stop()
	opts := rotation.Options{Kube: reg.Kube, RenewAt: o.RenewAt, Interval: o.Interval, Timeout: o.MemberTimeout,
		Logger: logger}
	if o.LeaderElect {
		namespace := o.LeaseNamespace
		if namespace == "" {
			namespace = reg.Namespace
		}
		opts.LeaderElection = &rotation.LeaderElection{Namespace: namespace, Name: o.LeaseName}
	}
	r, err := rotation.New(fleet, opts)
	if err != nil {
		return usageError{err}
	}
	if !o.Once {
		return r.Run(ctx)
	}
	renewed, errs := renewalPass(ctx, o.out, r)
	now := time.Now()
	switch next, ok := r.NextDue(); {
	case ok:
		prefix := ""
		if len(renewed) == 0 && len(errs) == 0 {
			prefix = "no token is due; "
		}
		when := "now"
		if next.At.After(now) {
			when = relative(next.At, now)
		}
		fmt.Fprintf(o.out, "%snext: %s, Secret %s, due %s (%s)\n", prefix, next.Member, next.Secret.Name, next.At.UTC().Format(time.RFC3339), when)
	case len(renewed) == 0 && len(errs) == 0:
		fmt.Fprintln(o.out, "no token is due: none of the selected Clusters points at a token that join stored (clusterregistry join makes one)")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d token(s) due could not be renewed (each is named above); the next pass tries again", len(errs), len(errs)+len(renewed))
	}
	return nil
}

var (
	rotateLong = `rotate renews the service-account tokens that join stored for the Clusters it selects, as
health --rotate-credentials does, on its own. Once --renew-at of a token's life has passed (two
thirds by default), it asks the member, with the current token and pinned to the member's server,
for a new token of the same account and lifetime, writes it and its expiry into the same Secret
(pinning and CA kept), and revokes the token it replaced: the Secret that token was bound to on
the member is deleted. Tools that read the Secret through a Resolver use the new token at their
next request, and retry once a request refused because the old one was just revoked.

It runs until interrupted, looking every --interval; --once makes one pass, says what it renewed
and exits (for a CronJob). With --leader-elect, replicas take turns through a Lease in the
registry. It needs get and update on the Secrets of the cluster sets it renews, beside what
deploy/health/clusterrole.yaml grants; see deploy/health/rotation-clusterrole.yaml.`

	rotateExample = `  # Renew the "fleet" cluster set's tokens as they come due, until interrupted
  clusterregistry rotate -n fleet

  # One pass over every cluster set, for a CronJob
  clusterregistry rotate -A --once

  # Renew now whatever is past a tenth of its life
  clusterregistry rotate -n fleet --once --renew-at 0.1

  # Two replicas taking turns
  clusterregistry rotate -A --leader-elect --leader-elect-namespace cluster-registry`
)

func newRotate(fac *factory) *cobra.Command {
	o := &RotateOptions{}
	cmd := &cobra.Command{
		Use:     "rotate [-n NAMESPACE | -A] [-l SELECTOR] [--once]",
		Short:   "Renew the tokens join stored before they expire, and revoke the ones replaced",
		Long:    rotateLong,
		Example: rotateExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    runOptions(fac, o),
	}
	f := cmd.Flags()
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "renew the tokens of every namespace (cluster set)")
	f.StringVarP(&o.Selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod")
	f.BoolVar(&o.Once, "once", false, "make one pass, say what was renewed, and exit")
	f.DurationVar(&o.Interval, "interval", time.Minute, "how often to look for tokens due")
	f.DurationVar(&o.MemberTimeout, "member-timeout", 30*time.Second, "time allowed for each step of a renewal that waits on the member; one that does not answer is tried again at the next pass")
	f.Float64Var(&o.RenewAt, "renew-at", 2.0/3, "the fraction of a token's life after which it is renewed")
	addLeaderElectFlags(f, &o.LeaderElect, &o.LeaseNamespace, &o.LeaseName, "clusterregistry-rotation")
	o.Trust.AddFlags(f)
	return cmd
}

// renewalPass renews what is due once, and says so: a line per token renewed, and a line per
// token that could not be, with why.
func renewalPass(ctx context.Context, out io.Writer, r *rotation.Rotator) ([]rotation.Renewal, []error) {
	renewed, errs := r.RenewDue(ctx)
	for _, n := range renewed {
		fmt.Fprintf(out, "%s: Secret %s renewed, valid until %s; %d replaced token(s) revoked\n",
			n.Member, n.Secret.Name, n.Expires.UTC().Format(time.RFC3339), n.Revoked)
	}
	for _, err := range errs {
		fmt.Fprintf(out, "could not renew: %v\n", err)
	}
	return renewed, errs
}
