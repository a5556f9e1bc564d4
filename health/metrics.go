package health

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/internal/metricsreg"
)

// metrics are the controller's Prometheus metrics. None has a series per member: a fleet of
// 10,000 would swamp a Prometheus.
type metrics struct {
	probes  *prometheus.HistogramVec
	reasons *prometheus.GaugeVec

	mu     sync.Mutex
	reason map[types.NamespacedName]string
	// expires is when each member's credentials expire, for those that say.
	expires map[types.NamespacedName]time.Time
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		probes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clusterregistry_health_probe_duration_seconds",
			Help:    "Time to probe one member, by the reason the probe found.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"reason"}),
		reasons: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clusterregistry_health_members",
			Help: "Members by the reason of their Ready condition.",
		}, []string{"reason"}),
		reason:  map[types.NamespacedName]string{},
		expires: map[types.NamespacedName]time.Time{},
	}
	// The soonest expiry is computed when scraped: one pass over the members per scrape, rather
	// than one per probe.
	soonest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "clusterregistry_health_credentials_soonest_expiry_timestamp_seconds",
		Help: "When the first of the members' credentials that say when they expire expires, in Unix seconds (0: none say).",
	}, m.soonestExpiry)
	if reg != nil {
		// A controller made again in the process (a restart, a test, a replica beside another)
		// replaces the last one's metrics.
		if err := metricsreg.Replace(reg, m.probes, m.reasons, soonest); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// setExpiry records when a member's credentials expire (zero: they do not say, or it is gone).
func (m *metrics) setExpiry(key types.NamespacedName, expires time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if expires.IsZero() {
		delete(m.expires, key)
		return
	}
	m.expires[key] = expires
}

func (m *metrics) soonestExpiry() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var soonest time.Time
	for _, t := range m.expires {
		if soonest.IsZero() || t.Before(soonest) {
			soonest = t
		}
	}
	if soonest.IsZero() {
		return 0
	}
	return float64(soonest.Unix())
}

func (m *metrics) observeProbe(reason string, d time.Duration) {
	m.probes.WithLabelValues(reason).Observe(d.Seconds())
}

// setReason moves a member to the gauge of its reason ("" forgets it).
func (m *metrics) setReason(key types.NamespacedName, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.reason[key]; ok {
		if old == reason {
			return
		}
		m.reasons.WithLabelValues(old).Dec()
	}
	if reason == "" {
		delete(m.reason, key)
		return
	}
	m.reason[key] = reason
	m.reasons.WithLabelValues(reason).Inc()
}
