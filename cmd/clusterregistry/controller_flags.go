package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/election"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/trustflags"
)

// The flags of the controllers that health and controllers run: hostFlags are the process's,
// and each controller has a struct of its own that adds its flags, checks its values and makes
// its package's options, so that a command takes the flags of the controllers it runs and no
// others.

// hostFlags are what a process hosting controllers takes, whichever it runs: the Clusters it
// watches, how members are trusted, leader election, sharding, metrics, probes and logs.
type hostFlags struct {
	AllNamespaces             bool
	Selector                  string
	Trust                     trustflags.Flags
	LeaderElect               bool
	LeaseNamespace, LeaseName string
	ShardGroup                string // divide the members among the replicas of this group
	ShardWeight               float64
	MetricsAddr               string
	MetricsClientCAFile       string // callers' client certificates; default the registry's own CAs
	ProbeAddr                 string // serve /healthz and /readyz here
	Verbose                   bool

	selector labels.Selector
}

func (h *hostFlags) add(f *pflag.FlagSet, leaseName string) {
	f.BoolVarP(&h.AllNamespaces, "all-namespaces", "A", false, "watch the Clusters of every namespace (cluster set)")
	f.StringVarP(&h.Selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod")
	addLeaderElectFlags(f, &h.LeaderElect, &h.LeaseNamespace, &h.LeaseName, leaseName)
	f.StringVar(&h.MetricsAddr, "metrics-bind-address", "", "serve Prometheus metrics at https://ADDRESS/metrics, e.g. :8443, to callers the registry authenticates and allows to get /metrics (default: off)")
	f.StringVar(&h.MetricsClientCAFile, "metrics-client-ca-file", "", "the CAs (PEM) whose client certificates identify metrics callers (default: those the registry's API server accepts, read from its ConfigMap kube-system/extension-apiserver-authentication)")
	f.StringVar(&h.ShardGroup, "shard-group", "", "divide the members among the replicas of this group: each probes and renews only the members it owns (Leases in --leader-elect-namespace, or -n's)")
	f.Float64Var(&h.ShardWeight, "shard-weight", 1, "with --shard-group, this replica's share of the members relative to the others'")
	f.StringVar(&h.ProbeAddr, "health-probe-bind-address", "", "serve /healthz and /readyz (ready once the registry's Clusters are listed) at this address, e.g. :8081 (default: off)")
	h.Trust.AddFlags(f)
	f.BoolVarP(&h.Verbose, "verbose", "v", false, "log every probe's outcome, not only transitions")
}

// complete parses the selector.
func (h *hostFlags) complete() error {
	var err error
	if h.selector, err = labels.Parse(h.Selector); err != nil {
		return usageError{fmt.Errorf("-l/--selector: %w", err)}
	}
	return nil
}

func (h *hostFlags) validate() error {
	switch {
	case h.LeaderElect && h.AllNamespaces && h.LeaseNamespace == "":
		return usageError{errors.New("--leader-elect with -A needs --leader-elect-namespace")}
	case h.ShardGroup != "" && h.LeaderElect:
		return usageError{errors.New("--shard-group and --leader-elect conflict: sharded replicas divide the members, rather than take turns with them all")}
	case h.ShardGroup != "" && h.AllNamespaces && h.LeaseNamespace == "":
		return usageError{errors.New("--shard-group with -A needs --leader-elect-namespace, where the replicas' Leases go")}
	case h.ShardWeight < 0:
		return usageError{fmt.Errorf("--shard-weight %v: want 0 (1) or more", h.ShardWeight)}
	case h.MetricsClientCAFile != "" && h.MetricsAddr == "":
		return usageError{errors.New("--metrics-client-ca-file goes with --metrics-bind-address")}
	}
	return nil
}

// hostEnv is what a process hosting controllers reads once, before any of them starts.
type hostEnv struct {
	reg        *registry
	resolver   *access.Resolver
	namespaces []string // nil for every namespace
	logger     logr.Logger
}

// open reads the registry, checks that -n's cluster set exists and makes the Resolver, with
// userAgent for the registry's logs.
func (h *hostFlags) open(ctx context.Context, f *factory, stderr io.Writer, userAgent string) (*hostEnv, error) {
	if _, err := h.Trust.ResolverOptions(); err != nil {
		return nil, usageError{err}
	}
	reg, err := f.Registry()
	if err != nil {
		return nil, err
	}
	env := &hostEnv{reg: reg, logger: commandLogger(stderr, h.Verbose)}
	if !h.AllNamespaces {
		if err := reg.ClusterSetExists(ctx, reg.Namespace); err != nil {
			return nil, err
		}
		env.namespaces = []string{reg.Namespace}
	}
	if env.resolver, err = h.Trust.ToResolver(reg.Kube, userAgent); err != nil {
		return nil, err
	}
	return env, nil
}

// leaseNamespace is where the Leases go: --leader-elect-namespace, else -n's (with -A, validate
// requires the flag).
func (h *hostFlags) leaseNamespace(reg *registry) string {
	if h.LeaseNamespace != "" {
		return h.LeaseNamespace
	}
	return reg.Namespace
}

// healthFlags are the health controller's: how often and how patiently members are probed.
type healthFlags struct {
	health.Options // the flags that map to it directly; open fills in the rest
}

func (p *healthFlags) add(f *pflag.FlagSet) {
	f.DurationVar(&p.Interval, "interval", 10*time.Second, "how often each member is probed")
	f.DurationVar(&p.Timeout, "probe-timeout", 5*time.Second, "time allowed for one probe of one member")
	f.IntVar(&p.Concurrency, "concurrency", 64, "most probes in flight at once")
	f.IntVar(&p.FailureThreshold, "failure-threshold", 3, "probes in a row that must fail before Ready turns False")
	f.IntVar(&p.SuccessThreshold, "success-threshold", 2, "probes in a row that must succeed before Ready turns True again")
	f.DurationVar(&p.Heartbeat, "heartbeat", time.Minute, "how often lastProbeTime is refreshed when nothing else changes")
	f.DurationVar(&p.ExpiringWithin, "expiring-within", 0, "say CredentialsExpiring (Ready stays True) once a member's credentials expire within this (default: a quarter of their lifetime, or 24h)")
	f.BoolVar(&p.KeepConnections, "keep-connections", false, "keep each member's connection open between probes: a fifth of the CPU per probe, a connection and a goroutine per member")
}

// validate refuses values that the library would take for its defaults, naming the flag.
func (p *healthFlags) validate() error {
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"interval", p.Interval}, {"probe-timeout", p.Timeout}, {"heartbeat", p.Heartbeat}} {
		if d.value <= 0 {
			return usageError{fmt.Errorf("--%s %s: want a positive duration", d.flag, d.value)}
		}
	}
	for _, n := range []struct {
		flag  string
		value int
	}{{"concurrency", p.Concurrency}, {"failure-threshold", p.FailureThreshold}, {"success-threshold", p.SuccessThreshold}} {
		if n.value < 1 {
			return usageError{fmt.Errorf("--%s %d: want 1 or more", n.flag, n.value)}
		}
	}
	return nil
}

// options are health.Options from the flags, for the Clusters env watches.
func (p *healthFlags) options(env *hostEnv, selector labels.Selector) health.Options {
	opts := p.Options
	opts.Namespaces, opts.Selector, opts.Resolver = env.namespaces, selector, env.resolver
	opts.Kube, opts.Registry, opts.Logger = env.reg.Kube, env.reg.Clusters, env.logger
	return opts
}

// rotationFlags are the rotator's: when a token is renewed, and how often it looks.
type rotationFlags struct {
	RenewAt  float64
	Interval time.Duration
}

func (r *rotationFlags) add(f *pflag.FlagSet) {
	f.Float64Var(&r.RenewAt, "renew-at", 2.0/3, "for the rotator, the fraction of a token's life after which it is renewed")
	f.DurationVar(&r.Interval, "rotate-interval", time.Minute, "for the rotator, the longest time between looks for tokens due (a token due sooner is renewed when due)")
}

func (r *rotationFlags) validate() error {
	switch {
	case r.RenewAt <= 0 || r.RenewAt >= 1:
		return usageError{fmt.Errorf("--renew-at %v: want a fraction of a token's life between 0 and 1", r.RenewAt)}
	case r.Interval <= 0:
		return usageError{fmt.Errorf("--rotate-interval %s: want a positive duration", r.Interval)}
	}
	return nil
}

func (r *rotationFlags) options() *rotation.Options {
	return &rotation.Options{RenewAt: r.RenewAt, Interval: r.Interval}
}

// profileFlags are the ClusterProfile publisher's: the cluster manager the profiles name, and
// the tunnel-proxy their consumers run.
type profileFlags struct {
	ManagerName, TunnelProxy string
}

func (p *profileFlags) add(f *pflag.FlagSet) {
	f.StringVar(&p.ManagerName, "cluster-manager", clusterprofile.DefaultManagerName, "for the ClusterProfile publisher, the cluster manager the profiles name (spec.clusterManager.name and the x-k8s.io/cluster-manager label)")
	f.StringVar(&p.TunnelProxy, "cluster-profile-tunnel-proxy", "", "for the ClusterProfile publisher, where the profiles' consumers run clusterregistry tunnel-proxy (host:port, e.g. 127.0.0.1:8118): "+
		"a tunnelled member's profile then offers an access provider with a proxy-url through it (default: such members offer none)")
}

func (p *profileFlags) options() *clusterprofile.PublishOptions {
	return &clusterprofile.PublishOptions{ManagerName: p.ManagerName, TunnelProxy: p.TunnelProxy}
}

// releaseFlags are the releases controller's: the repositories charts may come from, the CAs
// that verify them beside the system's, whether plain HTTP is allowed, and how long one member's
// work in one turn may take.
type releaseFlags struct {
	ChartHosts     []string
	ChartCAFile    string
	ChartPlainHTTP bool
	MemberTimeout  time.Duration

	charts *chartrepo.Fetcher // from the --chart-* flags, in validate
}

func (r *releaseFlags) add(f *pflag.FlagSet) {
	f.DurationVar(&r.MemberTimeout, "member-timeout", 30*time.Second, "for releases, the longest one member's work in one turn may take (an apply, a Helm operation): an unreachable member holds up no other")
	f.StringSliceVar(&r.ChartHosts, "chart-hosts", nil, "for releases, the only hosts (host or host:port) charts are fetched from; a Release naming another stalls (default: any)")
	f.StringVar(&r.ChartCAFile, "chart-ca-file", "", "for releases, CAs (PEM) that verify chart repositories, beside the system's")
	f.BoolVar(&r.ChartPlainHTTP, "chart-plain-http", false, "for releases, allow http:// chart repositories (for a lab: whoever is on the path can change the chart and read its credentials)")
}

// chartsSet says whether a --chart-* flag was given.
func (r *releaseFlags) chartsSet() bool {
	return len(r.ChartHosts) > 0 || r.ChartCAFile != "" || r.ChartPlainHTTP
}

// validate checks the values and makes the chart Fetcher, which reads --chart-ca-file.
func (r *releaseFlags) validate() error {
	if r.MemberTimeout <= 0 {
		return usageError{fmt.Errorf("--member-timeout %s: want a positive duration", r.MemberTimeout)}
	}
	opts := chartrepo.Options{Hosts: r.ChartHosts, AllowPlainHTTP: r.ChartPlainHTTP}
	if r.ChartCAFile != "" {
		pem, err := os.ReadFile(r.ChartCAFile)
		if err != nil {
			return usageError{fmt.Errorf("--chart-ca-file: %w", err)}
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return usageError{fmt.Errorf("--chart-ca-file %s: no PEM certificate in it", r.ChartCAFile)}
		}
		opts.RootCAs = roots
	}
	r.charts = chartrepo.NewFetcher(opts)
	return nil
}

// options are the releases controller's. Unsharded, releases controllers of one set take turns
// on the Lease clusterregistry-releases in the set's own namespace, elected or not, whatever
// --leader-elect-namespace says: a second process started beside a Deployment's (or the demo's),
// with -n or -A, waits rather than apply the same Releases.
func (r *releaseFlags) options(sharded bool) *delivery.ControllerOptions {
	opts := &delivery.ControllerOptions{Charts: r.charts, MemberTimeout: r.MemberTimeout}
	if !sharded {
		opts.Lease = &election.Lease{Name: delivery.DefaultLeaseName}
	}
	return opts
}
