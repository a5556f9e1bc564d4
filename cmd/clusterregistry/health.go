package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/controllers"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
)

// HealthOptions are health's flags and what Complete makes of them: Complete fills in, Validate
// checks without servers, Run runs the health controller, with the rotator and the ClusterProfile
// publisher when asked for, until interrupted, or probes once.
type HealthOptions struct {
	Host              hostFlags
	Health            healthFlags
	Rotation          rotationFlags
	Profiles          profileFlags
	ClusterProfiles   bool // publish a ClusterProfile per Cluster beside probing
	RotateCredentials bool // renew join's tokens beside probing
	Once              bool // one probe pass, then exit

	factory     *factory
	out, stderr io.Writer
}

// Complete parses the selector.
func (o *HealthOptions) Complete(f *factory, cmd *cobra.Command, _ []string) error {
	o.factory, o.stderr, o.out = f, cmd.ErrOrStderr(), cmd.OutOrStdout()
	return o.Host.complete()
}

// Validate refuses values that the library would take for its defaults, or that contradict each
// other, naming the flag.
func (o *HealthOptions) Validate() error {
	for _, validate := range []func() error{o.Host.validate, o.Health.validate, o.Rotation.validate} {
		if err := validate(); err != nil {
			return err
		}
	}
	if o.Once {
		for flag, set := range map[string]bool{"leader-elect": o.Host.LeaderElect, "cluster-profiles": o.ClusterProfiles, "metrics-bind-address": o.Host.MetricsAddr != "", "shard-group": o.Host.ShardGroup != ""} {
			if set {
				return usageError{fmt.Errorf("--once and --%s conflict: a single pass takes no turns, keeps nothing and serves nothing", flag)}
			}
		}
	}
	return nil
}

// Run builds the controllers from the flags and runs them until ctx ends, or probes once.
func (o *HealthOptions) Run(ctx context.Context) error {
	env, err := o.Host.open(ctx, o.factory, o.stderr, "clusterregistry-health")
	if err != nil {
		return err
	}
	probe := o.Health.options(env, o.Host.selector)
	if o.Once {
		// One pass has no history to damp: what each probe finds is what is written.
		probe.FailureThreshold, probe.SuccessThreshold = 1, 1
		c, err := health.New(probe)
		if err != nil {
			return usageError{err}
		}
		return o.runOnce(ctx, c, env.reg, probe)
	}
	opts := o.Host.hostOptions(env)
	opts.Health = &probe
	if o.RotateCredentials {
		opts.Rotation = o.Rotation.options()
	}
	if o.ClusterProfiles {
		opts.ClusterProfiles = o.Profiles.options()
	}
	return o.Host.runControllers(ctx, env, opts, o.chose)
}

// chose names health's flag that chose controller, for an error about it.
func (o *HealthOptions) chose(controller string) string {
	switch controller {
	case controllers.Rotation:
		return "--rotate-credentials"
	case controllers.ClusterProfiles:
		return "--cluster-profiles"
	}
	return controller
}

var (
	healthLong = `health probes the API server of every Cluster it selects, with the credentials a tool would use,
and writes the Cluster's status: the Ready condition (reasons Reachable, CredentialsExpiring,
Unreachable, NotReady, Unauthorized, CredentialsExpired, CredentialsUnavailable, NoEndpoint,
IdentityChanged, NotProbed), the member's
version, its identity (status.clusterID, the kube-system namespace's UID) and the last probe's
time. A state must persist for --failure-threshold (or --success-threshold) probes before Ready
changes; at steady state the only writes are one heartbeat per Cluster per --heartbeat.

It needs the ClusterRole in deploy/health/clusterrole.yaml in each namespace it watches. With
--leader-elect, replicas share the work of one: only the holder of a Lease probes and writes.

With --cluster-profiles it also publishes each Cluster as a ClusterProfile of SIG Multicluster's
inventory API: display name, version, cluster ID, ControlPlaneHealthy mirroring Ready, and the
member's server and CA (never a credential), removed with the Cluster. That needs the ClusterProfile
CRD, which SIG Multicluster's sigs.k8s.io/cluster-inventory-api publishes (health refuses to start
without it, saying so):
  kubectl apply -f ` + clusterprofile.CRDManifest + `
and deploy/health/clusterprofiles-clusterrole.yaml.

With --rotate-credentials it also renews the service-account tokens that join stored, asking each
member with the current token once two thirds of its life have passed, and writes the new token
and its expiry into the same Secret (update on Secrets, beside get), and revokes the token it
replaced. With --leader-elect it takes turns through a Lease of its own, named after
--leader-elect-name with -rotation appended. clusterregistry rotate runs it alone.`

	healthExample = `  # The "fleet" cluster set of the current context's registry
  clusterregistry health -n fleet

  # Every cluster set, production members only, two replicas taking turns
  clusterregistry health -A -l env=prod --leader-elect --leader-elect-namespace cluster-registry

  # Publish the cluster set as ClusterProfiles too, for Argo CD, MultiKueue or OCM to consume
  clusterregistry health -n fleet --cluster-profiles

  # Members that authenticate with a projected token file of this pod's
  clusterregistry health -n fleet --file-root /var/run/secrets/tokens --send-to https://prod-eu-1.example.com:6443`
)

func newHealth(fac *factory) *cobra.Command {
	o := &HealthOptions{}
	cmd := &cobra.Command{
		Use:     "health [-n NAMESPACE | -A] [-l SELECTOR]",
		Short:   "Probe every member and keep each Cluster's status true",
		Long:    healthLong,
		Example: healthExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    runOptions(fac, o),
	}
	f := cmd.Flags()
	o.Host.add(f, "clusterregistry-health")
	o.Health.add(f)
	o.Rotation.add(f)
	o.Profiles.add(f)
	f.BoolVar(&o.ClusterProfiles, "cluster-profiles", false, "also keep a ClusterProfile (multicluster.x-k8s.io, whose CRD must be installed) for each Cluster, for the ecosystem's tools to consume")
	f.BoolVar(&o.RotateCredentials, "rotate-credentials", false, "also renew the tokens join stored, with the tokens themselves, once --renew-at of their life has passed (as the rotate command)")
	f.BoolVar(&o.Once, "once", false, "probe each member once, write what changed, print what each probe found, and exit (thresholds of 1; with --rotate-credentials, one renewal pass too)")
	return cmd
}

// runOnce is --once: one probe of each member, its status written, a line each; with
// --rotate-credentials, then one renewal pass. It exits 1 only when a status could not be
// written (or a token due could not be renewed): a member found down is a finding, not a failure.
func (o *HealthOptions) runOnce(ctx context.Context, c *health.Controller, reg *registry, opts health.Options) error {
	results, err := c.ProbeOnce(ctx)
	if err != nil {
		return err
	}
	w := printers.GetNewTabWriter(o.out)
	fmt.Fprintln(w, "CLUSTER\tREADY\tREASON\tSTATUS\tMESSAGE")
	failed := 0 // statuses and tokens not written, each named above
	for _, r := range results {
		status := "unchanged"
		switch {
		case r.Err != nil:
			status = "not written: " + r.Err.Error()
			failed++
		case r.Wrote:
			status = "written"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Member, r.Condition.Status, r.Condition.Reason, status, strings.ReplaceAll(r.Condition.Message, "\n", " "))
	}
	_ = w.Flush()
	if len(results) == 0 {
		fmt.Fprintln(o.out, "no Cluster selected: nothing probed")
	}
	if o.RotateCredentials {
		fleet := multicluster.NewFleet(reg.Clusters, opts.Resolver, multicluster.FleetOptions{Namespaces: opts.Namespaces, Selector: opts.Selector})
		if err := fleet.Start(ctx); err != nil {
			return err
		}
		defer fleet.Stop()
		rotator, err := rotation.New(fleet, rotation.Options{Kube: reg.Kube, RenewAt: o.Rotation.RenewAt})
		if err != nil {
			return usageError{err}
		}
		_, errs := renewalPass(ctx, o.out, rotator)
		failed += len(errs)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d members' status or tokens could not be written (each is named above)", failed, len(results))
	}
	return nil
}

// addLeaderElectFlags adds --leader-elect and the Lease's namespace and name, as health and
// rotate take them.
func addLeaderElectFlags(f *pflag.FlagSet, elect *bool, namespace, name *string, defaultName string) {
	f.BoolVar(elect, "leader-elect", false, "take turns with other replicas through a Lease in the registry")
	f.StringVar(namespace, "leader-elect-namespace", "", "namespace of the Lease (default: the -n namespace)")
	f.StringVar(name, "leader-elect-name", defaultName, "name of the Lease")
}
