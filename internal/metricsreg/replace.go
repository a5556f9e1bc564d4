package metricsreg

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// replacing serializes Replace: two callers at once would each unregister the same old
// collector, and the second then find the first's new one and fail.
var replacing sync.Mutex

// Replace registers each collector with reg, first unregistering one already registered with
// the same descriptors.
func Replace(reg prometheus.Registerer, collectors ...prometheus.Collector) error {
	replacing.Lock()
	defer replacing.Unlock()
	for _, c := range collectors {
		err := reg.Register(c)
		if already := (prometheus.AlreadyRegisteredError{}); errors.As(err, &already) {
			reg.Unregister(already.ExistingCollector)
			err = reg.Register(c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
