package join_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/join"
)

// A plugin argument that passes a credential is never copied into the registry: refused, naming
// the flag and not its value, or left out when asked; the environment is never copied.
func TestExecProvider(t *testing.T) {
	plugin := &clientcmdapi.ExecConfig{
		Command: "kubelogin", APIVersion: "client.authentication.k8s.io/v1", ProvideClusterInfo: true,
		Args: []string{"get-token", "--oidc-client-secret=s3cret", "--password", "hunter2", "--server-id", "abc"},
		Env:  []clientcmdapi.ExecEnvVar{{Name: "TOKEN", Value: "t0ken"}},
	}
	_, _, err := join.ExecProvider(plugin, false)
	var argErr *join.CredentialArgError
	require.ErrorAs(t, err, &argErr)
	require.Equal(t, "--oidc-client-secret", argErr.Flag)
	require.NotContains(t, err.Error(), "s3cret")

	p, dropped, err := join.ExecProvider(plugin, true)
	require.NoError(t, err)
	require.Equal(t, []string{"--oidc-client-secret", "--password and its value"}, dropped)
	require.Equal(t, `["get-token","--server-id","abc"]`, p.Config["args"])
	require.Equal(t, "kubelogin", p.Config["command"])
	require.Equal(t, "true", p.Config["provideClusterInfo"])
	for k, v := range p.Config {
		for _, secret := range []string{"s3cret", "hunter2", "t0ken", "TOKEN"} {
			require.NotContains(t, v, secret, "config %q", k)
		}
	}
}
