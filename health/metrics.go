package health

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// metrics are the controller's Prometheus metrics. None has a series per member: a fleet of
// 10,000 would swamp a Prometheus.
type metrics struct {
	probes  *prometheus.HistogramVec
	reasons *prometheus.GaugeVec

	mu     sync.Mutex
	reason map[types.NamespacedName]string
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
		reason: map[types.NamespacedName]string{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.probes, m.reasons} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
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
