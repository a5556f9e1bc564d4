package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/controllers"
)

// ControllersOptions are the controllers command's flags and what Complete makes of them: the
// process's, and those of each controller it can run; --controllers says which run.
type ControllersOptions struct {
	Host        hostFlags
	Health      healthFlags
	Rotation    rotationFlags
	Profiles    profileFlags
	Releases    releaseFlags
	Controllers []string

	factory *factory
	stderr  io.Writer
}

// Complete parses the selector.
func (o *ControllersOptions) Complete(f *factory, cmd *cobra.Command, _ []string) error {
	o.factory, o.stderr = f, cmd.ErrOrStderr()
	return o.Host.complete()
}

// Validate checks the process's flags, then each chosen controller's, naming the flag.
func (o *ControllersOptions) Validate() error {
	if len(o.Controllers) == 0 {
		return usageError{errors.New("--controllers: name one or more of health, rotation, clusterprofiles, placements, releases, capacity")}
	}
	for _, c := range o.Controllers {
		if !slices.Contains(allControllers, c) {
			return usageError{fmt.Errorf("--controllers: %q: want health, rotation, clusterprofiles, placements, releases or capacity", c)}
		}
	}
	if o.Releases.chartsSet() && !o.runs(controllers.Releases) {
		return usageError{errors.New("--chart-hosts, --chart-ca-file and --chart-plain-http are for the releases controller: add it to --controllers")}
	}
	checks := []func() error{o.Host.validate, o.Health.validate, o.Rotation.validate}
	if o.runs(controllers.Releases) {
		checks = append(checks, o.Releases.validate)
	}
	for _, validate := range checks {
		if err := validate(); err != nil {
			return err
		}
	}
	return nil
}

func (o *ControllersOptions) runs(controller string) bool {
	return slices.Contains(o.Controllers, controller)
}

// Run runs the chosen controllers until ctx ends.
func (o *ControllersOptions) Run(ctx context.Context) error {
	env, err := o.Host.open(ctx, o.factory, o.stderr, "clusterregistry-health")
	if err != nil {
		return err
	}
	opts := o.Host.hostOptions(env)
	if o.runs(controllers.Health) {
		probe := o.Health.options(env, o.Host.selector)
		opts.Health = &probe
	}
	if o.runs(controllers.Rotation) {
		opts.Rotation = o.Rotation.options()
	}
	if o.runs(controllers.ClusterProfiles) {
		opts.ClusterProfiles = o.Profiles.options()
	}
	if o.runs(controllers.Placements) {
		opts.Placements = placementsOptions()
	}
	if o.runs(controllers.Releases) {
		opts.Releases = o.Releases.options(o.Host.ShardGroup != "")
	}
	if o.runs(controllers.Capacity) {
		opts.Capacity = &capacity.Options{}
	}
	return o.Host.runControllers(ctx, env, opts, func(controller string) string { return "--controllers " + controller })
}

var (
	controllersLong = `controllers runs the SDK's controllers together in one process, on one watch of the registry's
Clusters: health (probes each member and keeps its status true; see health --help), rotation
(renews the tokens join stored; see rotate --help), clusterprofiles (publishes each Cluster as
a SIG Multicluster ClusterProfile), placements (decides each Placement of the cluster sets and
writes its decision as SIG Multicluster PlacementDecisions, and its status; see
explain-placement --help) and releases (delivers each Release's objects to the members of its
decision and keeps them there: server-side apply, health and drift from watches of what it
applied, waves, prune; see describe release --help) and capacity (keeps each Cluster's
status.resources: its Nodes, what they hold and what its Pods request, written when a figure
moves 5 % of what the Nodes offer, or every 5 minutes). They share one Lease (--leader-elect: replicas take turns,
each ready as soon as it has listed the registry), one metrics endpoint (over TLS, for callers the
registry authenticates and allows to get /metrics) and one /healthz and /readyz, and stop
together, finishing what is under way within 30 seconds.

health is this command with --controllers=health, and --rotate-credentials and --cluster-profiles
adding the others. deploy/controllers has a Deployment of it.

With --shard-group, health, rotation, clusterprofiles and capacity divide the members among the replicas,
placements divides the Placements (each decided over every member), and releases divides each
Release's members (each replica applies to its own; the Release's owner writes its status).
Without placements and releases, each replica watches only the Clusters it owns: those of the
buckets it owns (the clusterregistry.k8s.io/shard-bucket label, which join and import --shard-buckets set) and
those in no bucket.`

	controllersExample = `  # Everything, for the "fleet" cluster set, with two replicas taking turns
  clusterregistry controllers -n fleet --controllers health,rotation,clusterprofiles,placements,releases --leader-elect \
    --metrics-bind-address :8443 --health-probe-bind-address :8081

  # Every cluster set; the Lease in a namespace of its own
  clusterregistry controllers -A --leader-elect --leader-elect-namespace clusterregistry-system`
)

func newControllers(fac *factory) *cobra.Command {
	o := &ControllersOptions{}
	cmd := &cobra.Command{
		Use:     "controllers [-n NAMESPACE | -A] [--controllers health,rotation,clusterprofiles,placements,releases]",
		Short:   "Run the SDK's controllers together: one watch of the registry, one Lease, one metrics endpoint",
		Long:    controllersLong,
		Example: controllersExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    runOptions(fac, o),
	}
	f := cmd.Flags()
	// The Lease is the process's, whatever it runs: named after health, it read as if health
	// alone held it.
	o.Host.add(f, "clusterregistry-controllers")
	o.Health.add(f)
	o.Rotation.add(f)
	o.Profiles.add(f)
	o.Releases.add(f)
	f.StringSliceVar(&o.Controllers, "controllers", []string{controllers.Health, controllers.Rotation}, "the controllers to run: health, rotation, clusterprofiles, placements, releases, capacity")
	_ = cmd.RegisterFlagCompletionFunc("controllers", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return allControllers, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}
