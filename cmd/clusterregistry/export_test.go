package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

// export, delete, import: the Clusters come back as they were; importing again changes nothing;
// a file with bad entries applies the good ones, names each bad one, and exits 1.
func TestExportImportRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kube-apiserver and etcd; run without -short")
	}
	ctx, lf := startFleet(t, localfleet.Options{Members: 2})
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	before, err := clusters.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)

	code, exported, stderr := cli("export")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, exported, "kind: ClusterList")
	require.NotContains(t, exported, "resourceVersion")
	require.NotContains(t, exported, "managedFields")
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	require.NoError(t, os.WriteFile(file, []byte(exported), 0o600))

	for _, c := range before.Items {
		require.NoError(t, clusters.Delete(ctx, c.Name, metav1.DeleteOptions{}))
	}
	code, out, stderr := cli("import", file)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Equal(t, 2, strings.Count(out, ": created"), out)
	after, err := clusters.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, after.Items, len(before.Items))
	for i := range before.Items {
		require.Equal(t, before.Items[i].Spec, after.Items[i].Spec)
		require.Equal(t, before.Items[i].Labels, after.Items[i].Labels)
		require.Equal(t, before.Items[i].Annotations, after.Items[i].Annotations)
	}
	code, again, _ := cli("export")
	require.Equal(t, 0, code)
	require.Equal(t, exported, again, "the round trip lost something")
	code, out, _ = cli("import", file)
	require.Equal(t, 0, code)
	require.Equal(t, 2, strings.Count(out, ": unchanged"), out)

	// Two bad entries and a good one: an http endpoint, and an inline credential.
	var list v1alpha1.ClusterList
	require.NoError(t, yaml.Unmarshal([]byte(exported), &list))
	list.Items[0].Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = "http://insecure.example.com"
	withToken := list.Items[1].DeepCopy()
	withToken.Name = "member-9"
	withToken.Spec.AuthInfo.Providers[0].Config = map[string]string{"token": "c2VjcmV0dG9rZW4tdmFsdWU="}
	good := list.Items[1].DeepCopy()
	good.Name = "member-10"
	list.Items = append(list.Items[:1], *withToken, *good)
	data, err := yaml.Marshal(list)
	require.NoError(t, err)
	badFile := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(badFile, data, 0o600))
	code, out, stderr = cli("import", badFile)
	require.Equal(t, 1, code, "%s%s", out, stderr)
	require.Contains(t, out, "cluster fleet/member-1: invalid, not imported: spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress")
	require.Contains(t, out, "cluster fleet/member-9: invalid, not imported: spec.authInfo.providers[0].config")
	require.Contains(t, out, "cluster fleet/member-10: created")
	require.Contains(t, stderr, "some Clusters were not imported: 2 of 3")
	require.NotContains(t, out+stderr, "c2VjcmV0dG9rZW4tdmFsdWU=")
	_, err = clusters.Get(ctx, "member-9", metav1.GetOptions{})
	require.Error(t, err, "a Cluster with an inline credential was imported")
	t.Logf("\n%s", out)
}
