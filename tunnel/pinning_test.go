package tunnel_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// A tunnelled member's server is an address in its own network, so its token is pinned to its
// agent too: a Cluster's editor who points the Cluster at another agent, or drops the tunnel so
// that readers dial the address from the registry's network, gets the token sent nowhere.
func TestTheTokenIsPinnedToTheAgent(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	rogue := record(t, memberAddress(t)) // a rogue agent that does lead to the member
	r.startAgent(t, r.agentAccount(t, ns, "rogue", rogue.addr), access.TunnelHost(ns, "rogue"))
	r.waitConnected(t, access.TunnelHost(ns, "rogue"))
	tunnelled(t, ns, "member-1-agent")
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	edit := func(tunnel *v1alpha1.Tunnel) *v1alpha1.Cluster {
		c := cluster(t, ns)
		c.Spec.KubernetesAPIEndpoints.Tunnel = tunnel
		c, err := clusters.Update(ctx, c, metav1.UpdateOptions{})
		require.NoError(t, err)
		return c
	}
	refused := func(t *testing.T, c *v1alpha1.Cluster, says string) {
		err := listNamespaces(ctx, resolverFor(t, r.dialer()), c)
		var pin *access.PinningError
		require.True(t, errors.As(err, &pin), "want a PinningError, got %v", err)
		require.ErrorContains(t, err, says)
		require.ErrorContains(t, err, v1alpha1.TunnelAgentAnnotation)
	}

	t.Run("through another agent", func(t *testing.T) {
		refused(t, edit(&v1alpha1.Tunnel{Agent: "rogue"}), `members reached through tunnel agent "member-1-agent"`)
		require.Zero(t, rogue.connections(), "the token's request went through an agent it is not pinned to")
	})
	t.Run("dialled directly", func(t *testing.T) {
		refused(t, edit(nil), "is dialled directly")
	})
	t.Run("a Secret for direct dials goes through no tunnel", func(t *testing.T) {
		pinToAgent(t, ns, "")
		refused(t, edit(&v1alpha1.Tunnel{Agent: "rogue"}), "is for members dialled directly")
		require.Zero(t, rogue.connections())
	})
}
