package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/controllers"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/trustflags"
)

// HealthOptions are health's flags and what Complete makes of them: Complete fills in, Validate
// checks without servers, Run runs the controller until interrupted.
type HealthOptions struct {
	Controller                health.Options // the flags that map to it directly
	AllNamespaces             bool
	Selector, MetricsAddr     string
	Trust                     trustflags.Flags
	LeaderElect               bool
	LeaseNamespace, LeaseName string
	Verbose                   bool
	ClusterProfiles           bool   // publish a ClusterProfile per Cluster beside probing
	ClusterManager            string // the profiles' cluster manager name
	ProfileTunnelProxy        string // where the profiles' consumers run tunnel-proxy
	ProbeAddr                 string // serve /healthz and /readyz here
	MetricsClientCAFile       string // callers' client certificates; default the registry's own CAs
	ShardGroup                string // divide the members among the replicas of this group
	ShardWeight               float64
	RotateCredentials         bool // renew join's tokens beside probing
	RenewAt                   float64
	RotateInterval            time.Duration
	Once                      bool // one probe pass, then exit
	// Controllers, for the controllers command, names what runs; nil for health, whose flags say.
	Controllers []string
	// For the releases controller: the repositories charts may come from, the CAs that verify
	// them beside the system's, and whether plain HTTP is allowed.
	ChartHosts     []string
	ChartCAFile    string
	ChartPlainHTTP bool
	charts         *chartrepo.Fetcher // from those three, in Validate
	// ReleaseMemberTimeout bounds the releases controller's work on one member in one turn.
	ReleaseMemberTimeout time.Duration

	out io.Writer

	factory *factory
	stderr  io.Writer
}

// Complete parses the selector.
func (o *HealthOptions) Complete(f *factory, cmd *cobra.Command, _ []string) error {
	o.factory, o.stderr, o.out = f, cmd.ErrOrStderr(), cmd.OutOrStdout()
	var err error
	if o.Controller.Selector, err = labels.Parse(o.Selector); err != nil {
		return usageError{fmt.Errorf("-l/--selector: %w", err)}
	}
	return nil
}

// Validate refuses values that the library would take for its defaults, or that contradict each
// other, naming the flag.
func (o *HealthOptions) Validate() error {
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"interval", o.Controller.Interval}, {"probe-timeout", o.Controller.Timeout}, {"heartbeat", o.Controller.Heartbeat}} {
		if d.value <= 0 {
			return usageError{fmt.Errorf("--%s %s: want a positive duration", d.flag, d.value)}
		}
	}
	for _, n := range []struct {
		flag  string
		value int
	}{{"concurrency", o.Controller.Concurrency}, {"failure-threshold", o.Controller.FailureThreshold}, {"success-threshold", o.Controller.SuccessThreshold}} {
		if n.value < 1 {
			return usageError{fmt.Errorf("--%s %d: want 1 or more", n.flag, n.value)}
		}
	}
	if o.LeaderElect && o.AllNamespaces && o.LeaseNamespace == "" {
		return usageError{errors.New("--leader-elect with -A needs --leader-elect-namespace")}
	}
	if o.ShardGroup != "" && o.LeaderElect {
		return usageError{errors.New("--shard-group and --leader-elect conflict: sharded replicas divide the members, rather than take turns with them all")}
	}
	if o.ShardGroup != "" && o.AllNamespaces && o.LeaseNamespace == "" {
		return usageError{errors.New("--shard-group with -A needs --leader-elect-namespace, where the replicas' Leases go")}
	}
	if o.ShardWeight < 0 {
		return usageError{fmt.Errorf("--shard-weight %v: want 0 (1) or more", o.ShardWeight)}
	}
	for _, c := range o.Controllers {
		if !slices.Contains(allControllers, c) {
			return usageError{fmt.Errorf("--controllers: %q: want health, rotation, clusterprofiles, placements or releases", c)}
		}
	}
	if o.Controllers != nil && len(o.Controllers) == 0 {
		return usageError{errors.New("--controllers: name one or more of health, rotation, clusterprofiles, placements, releases")}
	}
	if o.RenewAt <= 0 || o.RenewAt >= 1 {
		return usageError{fmt.Errorf("--renew-at %v: want a fraction of a token's life between 0 and 1", o.RenewAt)}
	}
	if o.RotateInterval <= 0 {
		return usageError{fmt.Errorf("--rotate-interval %s: want a positive duration", o.RotateInterval)}
	}
	if (len(o.ChartHosts) > 0 || o.ChartCAFile != "" || o.ChartPlainHTTP) && !slices.Contains(o.Controllers, controllers.Releases) {
		return usageError{errors.New("--chart-hosts, --chart-ca-file and --chart-plain-http are for the releases controller: add it to --controllers")}
	}
	if o.Controllers != nil && o.ReleaseMemberTimeout <= 0 {
		return usageError{fmt.Errorf("--member-timeout %s: want a positive duration", o.ReleaseMemberTimeout)}
	}
	if slices.Contains(o.Controllers, controllers.Releases) {
		var err error
		if o.charts, err = o.chartFetcher(); err != nil {
			return usageError{err}
		}
	}
	if o.MetricsClientCAFile != "" && o.MetricsAddr == "" {
		return usageError{errors.New("--metrics-client-ca-file goes with --metrics-bind-address")}
	}
	if o.Once {
		for flag, set := range map[string]bool{"leader-elect": o.LeaderElect, "cluster-profiles": o.ClusterProfiles, "metrics-bind-address": o.MetricsAddr != "", "shard-group": o.ShardGroup != ""} {
			if set {
				return usageError{fmt.Errorf("--once and --%s conflict: a single pass takes no turns, keeps nothing and serves nothing", flag)}
			}
		}
	}
	return nil
}

// Run builds the controller from the flags and runs it until ctx ends.
func (o *HealthOptions) Run(ctx context.Context) error {
	opts := o.Controller
	if _, err := o.Trust.ResolverOptions(); err != nil {
		return usageError{err}
	}
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	if !o.AllNamespaces {
		if err := reg.ClusterSetExists(ctx, reg.Namespace); err != nil {
			return err
		}
		opts.Namespaces = []string{reg.Namespace}
	}
	if opts.Resolver, err = o.Trust.ToResolver(reg.Kube, "clusterregistry-health"); err != nil {
		return err
	}
	opts.Kube, opts.Registry = reg.Kube, reg.Clusters
	opts.Logger = commandLogger(o.stderr, o.Verbose)
	if o.Once {
		// One pass has no history to damp: what each probe finds is what is written.
		opts.FailureThreshold, opts.SuccessThreshold = 1, 1
		c, err := health.New(opts)
		if err != nil {
			return usageError{err}
		}
		return o.runOnce(ctx, c, reg, opts)
	}
	return o.runControllers(ctx, reg, opts, o.controllers())
}

// controllers are the controllers the flags choose: --controllers', or the health controller with
// the rotator and the ClusterProfile publisher beside it when asked for.
func (o *HealthOptions) controllers() map[string]bool {
	if o.Controllers != nil {
		chosen := map[string]bool{}
		for _, c := range o.Controllers {
			chosen[c] = true
		}
		return chosen
	}
	return map[string]bool{controllers.Health: true, controllers.Rotation: o.RotateCredentials, controllers.ClusterProfiles: o.ClusterProfiles}
}

// chose names the flag that chose controller, as the user gave it, for an error about it:
// "--controllers ...,clusterprofiles" of the controllers command, or health's own flag.
func (o *HealthOptions) chose(controller string) string {
	if o.Controllers != nil {
		return "--controllers " + controller
	}
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
	o.addFlags(cmd.Flags(), "clusterregistry-health")
	f := cmd.Flags()
	f.BoolVar(&o.ClusterProfiles, "cluster-profiles", false, "also keep a ClusterProfile (multicluster.x-k8s.io, whose CRD must be installed) for each Cluster, for the ecosystem's tools to consume")
	f.BoolVar(&o.RotateCredentials, "rotate-credentials", false, "also renew the tokens join stored, with the tokens themselves, once --renew-at of their life has passed (as the rotate command)")
	f.BoolVar(&o.Once, "once", false, "probe each member once, write what changed, print what each probe found, and exit (thresholds of 1; with --rotate-credentials, one renewal pass too)")
	return cmd
}

// addFlags adds the flags health and controllers share.
func (o *HealthOptions) addFlags(f *pflag.FlagSet, leaseName string) {
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "watch the Clusters of every namespace (cluster set)")
	f.StringVarP(&o.Selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod")
	f.DurationVar(&o.Controller.Interval, "interval", 10*time.Second, "how often each member is probed")
	f.DurationVar(&o.Controller.Timeout, "probe-timeout", 5*time.Second, "time allowed for one probe of one member")
	f.IntVar(&o.Controller.Concurrency, "concurrency", 64, "most probes in flight at once")
	f.IntVar(&o.Controller.FailureThreshold, "failure-threshold", 3, "probes in a row that must fail before Ready turns False")
	f.IntVar(&o.Controller.SuccessThreshold, "success-threshold", 2, "probes in a row that must succeed before Ready turns True again")
	f.DurationVar(&o.Controller.Heartbeat, "heartbeat", time.Minute, "how often lastProbeTime is refreshed when nothing else changes")
	f.DurationVar(&o.Controller.ExpiringWithin, "expiring-within", 0, "say CredentialsExpiring (Ready stays True) once a member's credentials expire within this (default: a quarter of their lifetime, or 24h)")
	f.BoolVar(&o.Controller.KeepConnections, "keep-connections", false, "keep each member's connection open between probes: a fifth of the CPU per probe, a connection and a goroutine per member")
	addLeaderElectFlags(f, &o.LeaderElect, &o.LeaseNamespace, &o.LeaseName, leaseName)
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", "", "serve Prometheus metrics at https://ADDRESS/metrics, e.g. :8443, to callers the registry authenticates and allows to get /metrics (default: off)")
	f.StringVar(&o.MetricsClientCAFile, "metrics-client-ca-file", "", "the CAs (PEM) whose client certificates identify metrics callers (default: those the registry's API server accepts, read from its ConfigMap kube-system/extension-apiserver-authentication)")
	f.StringVar(&o.ShardGroup, "shard-group", "", "divide the members among the replicas of this group: each probes and renews only the members it owns (Leases in --leader-elect-namespace, or -n's)")
	f.Float64Var(&o.ShardWeight, "shard-weight", 1, "with --shard-group, this replica's share of the members relative to the others'")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", "", "serve /healthz and /readyz (ready once the registry's Clusters are listed) at this address, e.g. :8081 (default: off)")
	o.Trust.AddFlags(f)
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "log every probe's outcome, not only transitions")
	f.Float64Var(&o.RenewAt, "renew-at", 2.0/3, "for the rotator, the fraction of a token's life after which it is renewed")
	f.DurationVar(&o.RotateInterval, "rotate-interval", time.Minute, "for the rotator, the longest time between looks for tokens due (a token due sooner is renewed when due)")
	f.StringVar(&o.ClusterManager, "cluster-manager", clusterprofile.DefaultManagerName, "for the ClusterProfile publisher, the cluster manager the profiles name (spec.clusterManager.name and the x-k8s.io/cluster-manager label)")
	f.StringVar(&o.ProfileTunnelProxy, "cluster-profile-tunnel-proxy", "", "for the ClusterProfile publisher, where the profiles' consumers run clusterregistry tunnel-proxy (host:port, e.g. 127.0.0.1:8118): "+
		"a tunnelled member's profile then offers an access provider with a proxy-url through it (default: such members offer none)")
}

var (
	controllersLong = `controllers runs the SDK's controllers together in one process, on one watch of the registry's
Clusters: health (probes each member and keeps its status true; see health --help), rotation
(renews the tokens join stored; see rotate --help), clusterprofiles (publishes each Cluster as
a SIG Multicluster ClusterProfile), placements (decides each Placement of the cluster sets and
writes its decision as SIG Multicluster PlacementDecisions, and its status; see
explain-placement --help) and releases (delivers each Release's objects to the members of its
decision and keeps them there: server-side apply, health and drift from watches of what it
applied, waves, prune; see describe release --help). They share one Lease (--leader-elect: replicas take turns,
each ready as soon as it has listed the registry), one metrics endpoint (over TLS, for callers the
registry authenticates and allows to get /metrics) and one /healthz and /readyz, and stop
together, finishing what is under way within 30 seconds.

health is this command with --controllers=health, and --rotate-credentials and --cluster-profiles
adding the others. deploy/controllers has a Deployment of it.

With --shard-group, health, rotation and clusterprofiles divide the members among the replicas,
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
	o := &HealthOptions{}
	cmd := &cobra.Command{
		Use:     "controllers [-n NAMESPACE | -A] [--controllers health,rotation,clusterprofiles,placements,releases]",
		Short:   "Run the SDK's controllers together: one watch of the registry, one Lease, one metrics endpoint",
		Long:    controllersLong,
		Example: controllersExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    runOptions(fac, o),
	}
	// The Lease is the process's, whatever it runs: named after health, it read as if health
	// alone held it.
	o.addFlags(cmd.Flags(), "clusterregistry-controllers")
	cmd.Flags().DurationVar(&o.ReleaseMemberTimeout, "member-timeout", 30*time.Second, "for releases, the longest one member's work in one turn may take (an apply, a Helm operation): an unreachable member holds up no other")
	cmd.Flags().StringSliceVar(&o.ChartHosts, "chart-hosts", nil, "for releases, the only hosts (host or host:port) charts are fetched from; a Release naming another stalls (default: any)")
	cmd.Flags().StringVar(&o.ChartCAFile, "chart-ca-file", "", "for releases, CAs (PEM) that verify chart repositories, beside the system's")
	cmd.Flags().BoolVar(&o.ChartPlainHTTP, "chart-plain-http", false, "for releases, allow http:// chart repositories (for a lab: whoever is on the path can change the chart and read its credentials)")
	cmd.Flags().StringSliceVar(&o.Controllers, "controllers", []string{controllers.Health, controllers.Rotation}, "the controllers to run: health, rotation, clusterprofiles, placements, releases")
	_ = cmd.RegisterFlagCompletionFunc("controllers", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return allControllers, cobra.ShellCompDirectiveNoFileComp
	})
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
		rotator, err := rotation.New(fleet, rotation.Options{Kube: reg.Kube, RenewAt: o.RenewAt})
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
