package multicluster

import (
	"fmt"
	"time"
)

// FleetStatus says how current a Fleet's view of the registry is, so that a tool can refuse to
// act on a stale one:
//
//	if st := fleet.Status(); !st.Fresh() {
//		return fmt.Errorf("the registry's view is stale: %v", st)
//	}
type FleetStatus struct {
	// Synced is true once the Fleet holds every matching Cluster (Start has returned nil), and
	// until Stop.
	Synced bool
	// Err is the last error from listing or watching the registry, nil while the Fleet follows
	// it. Changes made while Err is set have not been seen.
	Err error
	// Since is when the current state began: when Err first occurred (the view may be stale since
	// then), when the Fleet synced, or when it started or stopped.
	Since time.Time
}

// Fresh reports whether the Fleet is synced and following the registry without error.
func (s FleetStatus) Fresh() bool { return s.Synced && s.Err == nil }

func (s FleetStatus) String() string {
	since := s.Since.Format(time.RFC3339)
	switch {
	case s.Err != nil:
		return fmt.Sprintf("not following the registry since %s: %v", since, s.Err)
	case !s.Synced:
		return fmt.Sprintf("not synced since %s", since)
	}
	return fmt.Sprintf("synced since %s", since)
}

// Status is how current the Fleet's view of the registry is.
func (f *Fleet) Status() FleetStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.status
}

// observe records the outcome of a list or a watch of the registry: an error marks the view
// stale from its first occurrence; a success after one marks it current again.
func (f *Fleet) observe(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err != nil && f.status.Err == nil:
		f.status.Err, f.status.Since = err, time.Now()
	case err != nil:
		f.status.Err = err // the latest cause; stale since the first
	case f.status.Err != nil:
		f.status.Err, f.status.Since = nil, time.Now()
	}
}

func (f *Fleet) setStatus(s FleetStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = s
}
