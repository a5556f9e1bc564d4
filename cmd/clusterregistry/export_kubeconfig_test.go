package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-registry/sdk/multicluster"
)

// export --format kubeconfig -o json writes JSON (it wrote YAML), which kubectl reads as a
// kubeconfig all the same.
func TestExportKubeconfigAsJSON(t *testing.T) {
	resolver, err := multicluster.NewResolver(multicluster.ResolverOptions{})
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
