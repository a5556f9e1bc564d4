package shard

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A replica's Lease has a valid name whatever its host name, and two replicas whose names differ
// only in what a Lease's name cannot hold still get two Leases.
func TestLeaseName(t *testing.T) {
	for _, tc := range []struct{ group, identity, want string }{
		{"health", "clusterregistry-controllers-0", "health-clusterregistry-controllers-0"},
		{"health", "vm-W32X36-a1b2c3", ""},
		{"health", "host_name", ""},
		{"health", strings.Repeat("a", 300), ""},
	} {
		name := leaseName(tc.group, tc.identity)
		require.Empty(t, validation.IsDNS1123Subdomain(name), "%q", name)
		if tc.want != "" {
			require.Equal(t, tc.want, name)
		}
	}
	require.NotEqual(t, leaseName("g", "Host-A"), leaseName("g", "host-a"))
	require.NotEqual(t, leaseName("g", "host_a"), leaseName("g", "host.a"))
	require.NotEqual(t, leaseName("g", strings.Repeat("a", 300)+"1"), leaseName("g", strings.Repeat("a", 300)+"2"))
}
