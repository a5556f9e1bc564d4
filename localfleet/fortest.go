package localfleet

import "testing"

// StartForTest is Start for one test: it fails tb at once if the fleet does not start, and stops
// the fleet when tb ends, after the test's own deferred calls, failing tb if the servers do not
// stop. Starting is bounded by tb's context, which ends when the test does.
func StartForTest(tb testing.TB, opts Options) *Fleet {
	tb.Helper()
	f, err := Start(tb.Context(), opts)
	if err != nil {
		tb.Fatalf("starting a local fleet: %v", err)
	}
	tb.Cleanup(func() {
		if err := f.Stop(); err != nil {
			tb.Errorf("stopping the local fleet: %v", err)
		}
	})
	return f
}
