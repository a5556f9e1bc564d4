package health

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/election"
	"github.com/cluster-registry/sdk/multicluster"
)

// Options configure a Controller. Registry, Kube and Resolver are required; the rest have
// defaults.
type Options struct {
	// Registry reads Clusters and writes their status.
	Registry versioned.Interface
	// Kube writes Events (and Leases, for leader election) in the registry.
	Kube kubernetes.Interface
	// Resolver turns Clusters into credentials, by the same trust rules as the tools that will
	// use them: a member is Ready only if those credentials work.
	Resolver *access.Resolver

	// Members, if set, are the members to probe: a Fleet (or a view of one) that other
	// controllers of the process share, which its owner starts before Run and stops after. Nil
	// makes the controller a Fleet of its own, of Namespaces and Selector, for its Run alone.
	Members multicluster.MemberSource
	// Namespaces are the cluster sets to watch; empty means all. Not with Members, whose owner
	// chose them.
	Namespaces []string
	// Selector keeps only Clusters whose labels match; nil keeps all. Not with Members.
	Selector labels.Selector

	// Interval is how often each member is probed. Default 10s.
	Interval time.Duration
	// Timeout bounds one probe of one member, all its requests included. Default 5s.
	Timeout time.Duration
	// Concurrency is the most probes in flight at once. Default 64. Status writes are made by a
	// quarter as many writers, and, while more writes wait than this, urgent ones (Ready changes)
	// by the probes' workers too.
	Concurrency int
	// FailureThreshold is how many probes in a row must see a member failing, the same way,
	// before Ready turns False (or changes reason). Default 3. IdentityChanged needs one.
	FailureThreshold int
	// SuccessThreshold is how many probes in a row must see a member healthy before Ready turns
	// True again. Default 2.
	SuccessThreshold int
	// Heartbeat is how often lastProbeTime is refreshed while nothing else changes: the only
	// writes at steady state. Default 60s, so at most one write per Cluster a minute.
	Heartbeat time.Duration
	// KeepConnections keeps each member's connection open between probes: no TLS handshake per
	// probe, but a connection, its buffers and a goroutine per member. By default a probe's
	// connection is closed when it is done, so an idle member costs no goroutine.
	//
	// A probe reads /readyz, /version and the kube-system namespace (the member's identity). Over
	// a kept connection it reads /readyz alone until the connection is replaced or the
	// Heartbeat is due: an open connection reaches the server it was opened to, so the identity
	// it read cannot change under it. A cluster reinstalled behind the same address is still
	// IdentityChanged at the first probe over the new connection.
	KeepConnections bool
	// UnknownAfter is how long a member may go unprobed before its Ready condition turns Unknown
	// with reason NotProbed. Default 3 intervals plus a timeout.
	UnknownAfter time.Duration
	// ExpiringWithin is how close to their expiry a member's credentials may come before Ready
	// says CredentialsExpiring (still True). By default, a quarter of the credentials' lifetime
	// (a rotator renews them at two thirds), or 24 hours for credentials that do not say when
	// they were issued. Only credentials that say when they expire are judged: a JWT's exp, a
	// client certificate's NotAfter.
	ExpiringWithin time.Duration

	// LeaderElection, if set, makes replicas of the controller take turns: only the holder of a
	// Lease in the registry probes and writes. Nil runs without election.
	LeaderElection *LeaderElection

	// FieldManager owns the status fields the controller writes. Default "clusterregistry-health".
	FieldManager string
	// Metrics, if set, receives the controller's Prometheus metrics; a Controller made again with
	// the same Registerer replaces the last one's.
	Metrics prometheus.Registerer
	// Logger logs transitions and errors, never a credential. Default: discard.
	Logger logr.Logger
}

const defaultFieldManager = "clusterregistry-health"

// LeaderElection names the Lease that replicas of the controller contend for: election.Lease,
// the one type of every controller of the SDK. Its Name is "clusterregistry-health" by default.
type LeaderElection = election.Lease

func (o *Options) withDefaults() (Options, error) {
	d := *o
	var errs []error
	if d.Registry == nil {
		errs = append(errs, errors.New("health.Options.Registry is required"))
	}
	if d.Kube == nil {
		errs = append(errs, errors.New("health.Options.Kube is required"))
	}
	if d.Resolver == nil && d.Members == nil {
		errs = append(errs, errors.New("health.Options.Resolver is required"))
	}
	if d.Members != nil && (len(d.Namespaces) > 0 || d.Selector != nil) {
		errs = append(errs, errors.New("health.Options.Members and Namespaces or Selector: the Members' owner chose the members; set one or the other"))
	}
	for _, v := range []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{{"Interval", &d.Interval, 10 * time.Second}, {"Timeout", &d.Timeout, 5 * time.Second}, {"Heartbeat", &d.Heartbeat, time.Minute}} {
		if *v.value < 0 {
			errs = append(errs, fmt.Errorf("health.Options.%s is negative (%s)", v.name, *v.value))
		}
		if *v.value == 0 {
			*v.value = v.def
		}
	}
	for _, v := range []struct {
		name       string
		value      *int
		def, least int
	}{{"Concurrency", &d.Concurrency, 64, 1}, {"FailureThreshold", &d.FailureThreshold, 3, 1}, {"SuccessThreshold", &d.SuccessThreshold, 2, 1}} {
		if *v.value == 0 {
			*v.value = v.def
		}
		if *v.value < v.least {
			errs = append(errs, fmt.Errorf("health.Options.%s is %d, want at least %d", v.name, *v.value, v.least))
		}
	}
	if d.UnknownAfter == 0 {
		d.UnknownAfter = 3*d.Interval + d.Timeout
	}
	if d.UnknownAfter <= d.Interval {
		errs = append(errs, fmt.Errorf("health.Options.UnknownAfter (%s) must be longer than Interval (%s)", d.UnknownAfter, d.Interval))
	}
	if le := d.LeaderElection; le != nil {
		copied := *le
		copied.Name = cmp.Or(copied.Name, defaultFieldManager)
		copied = copied.Defaulted()
		d.LeaderElection = &copied
		if err := copied.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("health.Options.LeaderElection: %w", err))
		}
	}
	if d.FieldManager == "" {
		d.FieldManager = defaultFieldManager
	}
	if d.Logger.GetSink() == nil {
		d.Logger = logr.Discard()
	}
	return d, errors.Join(errs...)
}
