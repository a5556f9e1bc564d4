package metricsreg

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// Controllers made at once in one process, with one registry that already holds an earlier
// controller's metrics, each replace the last: both used to unregister the old collector, and the
// second then found the first's and failed ("duplicate metrics collector registration
// attempted"), as two sharded replicas in one test process did.
func TestReplaceAtOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	collectors := func() []prometheus.Collector {
		return []prometheus.Collector{
			prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "members", Help: "h"}, []string{"reason"}),
			prometheus.NewCounter(prometheus.CounterOpts{Name: "probes_total", Help: "h"}),
		}
	}
	require.NoError(t, Replace(reg, collectors()...))
	for range 200 {
		errs := make(chan error, 2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				errs <- Replace(reg, collectors()...)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
}
