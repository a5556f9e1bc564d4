package health

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
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
	Resolver *multicluster.Resolver

	// Namespaces are the cluster sets to watch; empty means all.
	Namespaces []string
	// Selector keeps only Clusters whose labels match; nil keeps all.
	Selector labels.Selector

	// Interval is how often each member is probed. Default 10s.
	Interval time.Duration
	// Timeout bounds one probe of one member, all its requests included. Default 5s.
	Timeout time.Duration
	// Concurrency is the most probes in flight at once. Default 64.
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
	// UnknownAfter is how long a member may go unprobed before its Ready condition turns Unknown
	// with reason NotProbed. Default 3 intervals plus a timeout.
	UnknownAfter time.Duration

	// FieldManager owns the status fields the controller writes. Default "clusterregistry-health".
	FieldManager string
	// Metrics, if set, receives the controller's Prometheus metrics.
	Metrics prometheus.Registerer
	// Logger logs transitions and errors, never a credential. Default: discard.
	Logger logr.Logger
}

const defaultFieldManager = "clusterregistry-health"

func (o *Options) withDefaults() (Options, error) {
	d := *o
	var errs []error
	if d.Registry == nil {
		errs = append(errs, errors.New("Options.Registry is required"))
	}
	if d.Kube == nil {
		errs = append(errs, errors.New("Options.Kube is required"))
	}
	if d.Resolver == nil {
		errs = append(errs, errors.New("Options.Resolver is required"))
	}
	for _, v := range []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{{"Interval", &d.Interval, 10 * time.Second}, {"Timeout", &d.Timeout, 5 * time.Second}, {"Heartbeat", &d.Heartbeat, time.Minute}} {
		if *v.value < 0 {
			errs = append(errs, fmt.Errorf("Options.%s is negative (%s)", v.name, *v.value))
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
			errs = append(errs, fmt.Errorf("Options.%s is %d, want at least %d", v.name, *v.value, v.least))
		}
	}
	if d.UnknownAfter == 0 {
		d.UnknownAfter = 3*d.Interval + d.Timeout
	}
	if d.UnknownAfter <= d.Interval {
		errs = append(errs, fmt.Errorf("Options.UnknownAfter (%s) must be longer than Interval (%s)", d.UnknownAfter, d.Interval))
	}
	if d.FieldManager == "" {
		d.FieldManager = defaultFieldManager
	}
	if d.Logger.GetSink() == nil {
		d.Logger = logr.Discard()
	}
	return d, errors.Join(errs...)
}
