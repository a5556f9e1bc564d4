package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Each account's namespace is a valid namespace name, readable, and its own: two accounts whose
// names differ only past the 63 characters a namespace may have get two namespaces.
func TestMemberNamespace(t *testing.T) {
	long := strings.Repeat("a", 60)
	seen := map[string]string{}
	for _, c := range []struct{ set, name string }{
		{"fleet", "dev"}, {"fleet", "dev.eu-west-1"}, {long, "x"}, {long, "y"}, {"fleet", strings.Repeat("b.", 100) + "c"},
	} {
		account := memberAccount("registry-uid", c.set, c.name)
		ns := memberNamespace(account)
		require.Empty(t, validation.IsDNS1123Label(ns), "%s/%s: namespace %q", c.set, c.name, ns)
		require.True(t, strings.HasPrefix(ns, "clusterregistry-"), ns)
		require.Equal(t, account[strings.LastIndexByte(account, '-'):], ns[strings.LastIndexByte(ns, '-'):], "the digest is kept")
		require.NotContains(t, seen, ns, "%s/%s and %s share a namespace", c.set, c.name, seen[ns])
		seen[ns] = c.set + "/" + c.name
	}
	require.Equal(t, "clusterregistry-fleet-dev"+memberAccount("registry-uid", "fleet", "dev")[len("clusterregistry-fleet-dev"):],
		memberNamespace(memberAccount("registry-uid", "fleet", "dev")), "a short name is kept as it is")
}
