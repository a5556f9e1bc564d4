package join_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/join"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// lf is the package's local fleet: a registry and one member, shared by every test; each test
// joins the member into cluster sets of its own.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	fleetmain.Main(m, &lf, localfleet.Options{Members: 1}, nil)
}

// newSet makes an empty cluster set in the registry for the test, and returns the Registry of it.
func newSet(t *testing.T) join.Registry {
	t.Helper()
	reg, err := join.RegistryFor(lf.Registry.Config, fleettest.NewSet(t, lf))
	require.NoError(t, err)
	return reg
}

// memberKube is an administrator's client of the member, to check what Join made there.
func memberKube() kubernetes.Interface { return kubernetes.NewForConfigOrDie(lf.Members[0].Config) }
