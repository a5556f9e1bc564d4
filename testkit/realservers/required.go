package realservers

import "testing"

// Required skips tb under -short: it needs kube-apiserver and etcd, which hack/test.sh builds
// (and localfleet starts).
func Required(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs kube-apiserver and etcd; run without -short (hack/test.sh builds them)")
	}
}
