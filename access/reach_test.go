package access

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

func reachSpec() *v1alpha1.ClusterSpec {
	return &v1alpha1.ClusterSpec{
		DisplayName: "Dev",
		KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
			ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
				{ClientCIDR: "10.0.0.0/8", ServerAddress: "https://10.0.0.1"},
				{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://dev.example.com"},
			},
			CABundle: []byte("ca"),
		},
		AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{
			{Name: "token", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret}, Config: map[string]string{"name": "dev-token", "namespace": "fleet"}},
			{Name: "kc", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeKubeconfigSecret}},
		}},
	}
}

// Every field that decides how a member is reached changes the digest; nothing else does, and
// neither does the order of a provider's config entries or an empty slice for a nil one.
func TestReachDigest(t *testing.T) {
	base := ReachDigest(reachSpec())
	for name, change := range map[string]func(*v1alpha1.ClusterSpec){
		"an endpoint's address": func(s *v1alpha1.ClusterSpec) {
			s.KubernetesAPIEndpoints.ServerEndpoints[1].ServerAddress = "https://evil.example.com"
		},
		"an endpoint's client CIDR": func(s *v1alpha1.ClusterSpec) { s.KubernetesAPIEndpoints.ServerEndpoints[0].ClientCIDR = "10.0.0.0/16" },
		"the endpoints' order":      func(s *v1alpha1.ClusterSpec) { e := s.KubernetesAPIEndpoints.ServerEndpoints; e[0], e[1] = e[1], e[0] },
		"one endpoint fewer": func(s *v1alpha1.ClusterSpec) {
			s.KubernetesAPIEndpoints.ServerEndpoints = s.KubernetesAPIEndpoints.ServerEndpoints[:1]
		},
		"the CA bundle":              func(s *v1alpha1.ClusterSpec) { s.KubernetesAPIEndpoints.CABundle = []byte("other") },
		"a provider's name":          func(s *v1alpha1.ClusterSpec) { s.AuthInfo.Providers[0].Name = "tok" },
		"a provider's type":          func(s *v1alpha1.ClusterSpec) { s.AuthInfo.Providers[0].Type.Name = v1alpha1.ProviderTypeTokenFile },
		"a provider's config value":  func(s *v1alpha1.ClusterSpec) { s.AuthInfo.Providers[0].Config["name"] = "other-token" },
		"a provider's config key":    func(s *v1alpha1.ClusterSpec) { delete(s.AuthInfo.Providers[0].Config, "namespace") },
		"an empty config entry more": func(s *v1alpha1.ClusterSpec) { s.AuthInfo.Providers[1].Config = map[string]string{"": ""} },
		"the providers' order":       func(s *v1alpha1.ClusterSpec) { p := s.AuthInfo.Providers; p[0], p[1] = p[1], p[0] },
		"a value moved between fields": func(s *v1alpha1.ClusterSpec) {
			p := s.AuthInfo.Providers
			p[1].Name, p[1].Type.Name = p[1].Type.Name, p[1].Name
		},
	} {
		s := reachSpec()
		change(s)
		require.NotEqual(t, base, ReachDigest(s), "changing %s must count as reaching the member differently", name)
	}
	for name, change := range map[string]func(*v1alpha1.ClusterSpec){
		"the display name": func(s *v1alpha1.ClusterSpec) { s.DisplayName = "Development" },
		"config rebuilt": func(s *v1alpha1.ClusterSpec) {
			s.AuthInfo.Providers[0].Config = map[string]string{"namespace": "fleet", "name": "dev-token"}
		},
		"an empty config as nil": func(s *v1alpha1.ClusterSpec) { s.AuthInfo.Providers[1].Config = map[string]string{} },
	} {
		s := reachSpec()
		change(s)
		require.Equal(t, base, ReachDigest(s), "changing %s must not count", name)
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { ReachDigest(reachSpec()) })-testing.AllocsPerRun(100, func() { reachSpec() }), "ReachDigest allocates")
}
