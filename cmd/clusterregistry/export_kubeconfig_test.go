package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// export --format kubeconfig -o json writes JSON (it wrote YAML), which kubectl reads as a
// kubeconfig all the same.
func TestExportKubeconfigAsJSON(t *testing.T) {
	resolver, err := access.NewResolver(access.ResolverOptions{})
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	require.NoError(t, exportKubeconfig(t.Context(), &out, &errOut, resolver, nil, kubeconfigExport{command: "clusterregistry", output: "json"}))
	require.True(t, json.Valid(out.Bytes()), "not JSON:\n%s", out.String())
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	require.Equal(t, "Config", doc["kind"])
	_, err = clientcmd.Load(out.Bytes())
	require.NoError(t, err)
}

// --context-prefix names the contexts, clusters and users apart from the user's own.
func TestExportKubeconfigContextPrefix(t *testing.T) {
	resolver, err := access.NewResolver(access.ResolverOptions{Providers: map[string]access.Provider{"static": access.ProviderFunc(
		func(context.Context, *access.Request) (*access.Credentials, error) {
			return &access.Credentials{BearerToken: "static"}, nil
		})}, ClientIP: netip.MustParseAddr("127.0.0.1")})
	require.NoError(t, err)
	c := v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "prod"}, Spec: v1alpha1.ClusterSpec{
		KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://prod.example.com"}}},
		AuthInfo:               v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "p", Type: v1alpha1.AuthProviderType{Name: "static"}}}},
	}}
	var out, errOut bytes.Buffer
	require.NoError(t, exportKubeconfig(t.Context(), &out, &errOut, resolver, []v1alpha1.Cluster{c}, kubeconfigExport{command: "clusterregistry", prefix: "fleet-"}))
	cfg, err := clientcmd.Load(out.Bytes())
	require.NoError(t, err)
	require.Contains(t, cfg.Contexts, "fleet-prod")
	require.Equal(t, "fleet-prod", cfg.Contexts["fleet-prod"].Cluster)
	require.Equal(t, "https://prod.example.com:443", cfg.Clusters["fleet-prod"].Server)
	require.NotContains(t, out.String(), "static", "a credential in the kubeconfig")
	require.NotContains(t, out.String(), "null", "a field written as null, which kubectl config view shows as such")
}
