package join_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cluster-registry/sdk/join"
)

// Each account's names are valid object names, readable, and its own: two accounts whose names
// differ only past the 63 characters a namespace may have get two namespaces.
func TestAccountFor(t *testing.T) {
	long := strings.Repeat("a", 60)
	seen := map[string]string{}
	for _, c := range []struct{ set, name string }{
		{"fleet", "dev"}, {"fleet", "dev.eu-west-1"}, {long, "x"}, {long, "y"}, {"fleet", strings.Repeat("b.", 100) + "c"},
	} {
		a := join.AccountFor("registry-uid", c.set, c.name)
		require.Empty(t, validation.IsDNS1123Label(a.Namespace), "%s/%s: namespace %q", c.set, c.name, a.Namespace)
		require.Empty(t, validation.IsDNS1123Subdomain(a.Name), "%s/%s: account %q", c.set, c.name, a.Name)
		require.True(t, strings.HasPrefix(a.Namespace, "clusterregistry-"), a.Namespace)
		require.Equal(t, a.Name[strings.LastIndexByte(a.Name, '-'):], a.Namespace[strings.LastIndexByte(a.Namespace, '-'):], "the digest is kept")
		require.NotContains(t, seen, a.Namespace, "%s/%s and %s share a namespace", c.set, c.name, seen[a.Namespace])
		seen[a.Namespace] = c.set + "/" + c.name
	}
	a := join.AccountFor("registry-uid", "fleet", "dev")
	require.Equal(t, a.Name, a.Namespace, "a short name is kept as it is")
	require.NotEqual(t, a, join.AccountFor("other-registry", "fleet", "dev"), "two registries share an account")
	require.Equal(t, a.Namespace+"/"+a.Name, a.String())
}
