package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// export, delete, import: the Clusters come back as they were; importing again changes nothing;
// a file with bad entries applies the good ones, names each bad one, and exits 1.
func TestExportImportRoundTrip(t *testing.T) {
	lf, cli, clusters := registeredSet(t)
	ctx := t.Context()
	before, err := clusters.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)

	code, exported, stderr := cli("export")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "note: 2 of the 2 Clusters point at Secrets, which export leaves out")
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
	s := &roundTrip{lf: lf, ctx: ctx, cli: cli, clusters: clusters, exported: exported, file: file, after: after}
	s.intoAnotherSet(t)
	s.printed(t)
	s.badEntries(t)
}

// roundTrip is what the parts of TestExportImportRoundTrip share, in order.
type roundTrip struct {
	lf       *localfleet.Fleet
	ctx      context.Context
	cli      func(args ...string) (int, string, string)
	clusters crv1alpha1.ClusterInterface
	exported string
	file     string
	after    *v1alpha1.ClusterList
}

// intoAnotherSet: -n that contradicts the file's namespace is refused; without the file's
// namespaces, Clusters go to -n's, naming the Secrets missing there.
func (s *roundTrip) intoAnotherSet(t *testing.T) {
	lf, ctx, cli, exported, file := s.lf, s.ctx, s.cli, s.exported, s.file
	// -n that contradicts the file's namespace is refused, and nothing is imported; with the
	// file's namespaces removed, the Clusters go to -n's, and the report names the Secrets they
	// point at that are not there (import carries Clusters, not Secrets).
	other := fleettest.NewSet(t, lf)
	others := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(other)
	otherCLI := commandLine(ctx, lf.Registry.Kubeconfig, other)
	code, out, stderr := otherCLI("import", file)
	require.Equal(t, 1, code, out)
	require.Contains(t, stderr, fmt.Sprintf("2 Clusters are of other namespaces than -n %[1]s (%[2]s/member-1, %[2]s/member-2); nothing was imported", other, lf.Namespace))
	none, err := others.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, none.Items)
	code, out, stderr = otherCLI("export")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "items: []")
	require.Equal(t, "No Clusters found in namespace "+other+".\n", stderr)
	anywhere := filepath.Join(t.TempDir(), "anywhere.yaml")
	var unplaced v1alpha1.ClusterList
	require.NoError(t, yaml.Unmarshal([]byte(exported), &unplaced))
	for i := range unplaced.Items {
		unplaced.Items[i].Namespace = ""
	}
	data, err := yaml.Marshal(unplaced)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(anywhere, data, 0o600))
	code, out, stderr = otherCLI("import", anywhere)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "cluster "+other+"/member-1: created")
	require.Contains(t, out, "cluster "+other+"/member-1: warning: provider")
	require.Regexp(t, `cluster `+other+`/member-1: warning: provider "\S+" points at Secret `+other+`/\S+, which is not there`, out)
	require.Regexp(t, `cluster `+other+`/member-2: warning: provider "\S+" points at Secret `+other+`/member-2-kubeconfig, which is not there`, out)
	code, out, _ = cli("import", file)
	require.Equal(t, 0, code)
	require.NotContains(t, out, "warning", "the Secrets are there in the Clusters' own namespace")
}

// printed: -o prints the applied Clusters, as the registry has them, and the report on stderr.
func (s *roundTrip) printed(t *testing.T) {
	cli, file, after := s.cli, s.file, s.after
	// -o: the applied Clusters on stdout, as the registry has them, and the report on stderr.
	code, out, stderr := cli("import", file, "-o", "yaml")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 2, strings.Count(stderr, ": unchanged"), stderr)
	var printed v1alpha1.ClusterList
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &printed), out)
	require.Equal(t, "List", printed.Kind)
	require.Len(t, printed.Items, 2)
	for i, c := range printed.Items {
		require.Equal(t, "Cluster", c.Kind)
		require.Equal(t, after.Items[i].Spec, c.Spec)
		require.NotEmpty(t, c.UID, "the object as the registry returned it")
		require.Empty(t, c.ManagedFields)
	}
}

// badEntries: two bad entries and a good one: the bad are named, the good one imported.
func (s *roundTrip) badEntries(t *testing.T) {
	lf, ctx, cli, clusters, exported, file := s.lf, s.ctx, s.cli, s.clusters, s.exported, s.file
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
	code, out, stderr := cli("import", badFile, "-o", "name")
	require.Equal(t, 1, code, "%s%s", out, stderr)
	require.Equal(t, "cluster.clusterregistry.k8s.io/member-10\n", out, "-o name lists only what was applied")
	require.Contains(t, stderr, "cluster "+lf.Namespace+"/member-1: invalid, not imported: spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress")
	require.Contains(t, stderr, "cluster "+lf.Namespace+"/member-9: invalid, not imported: spec.authInfo.providers[0].config")
	require.Contains(t, stderr, "cluster "+lf.Namespace+"/member-10: created")
	require.Contains(t, stderr, "some Clusters were not imported: 2 of 3")
	require.NotContains(t, out+stderr, "c2VjcmV0dG9rZW4tdmFsdWU=")
	code, out, stderr = cli("import", file, "-o", "jsonpath={.items[*].metadata.name}")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "member-1 member-2", out, "kubectl's printers, jsonpath included")
	code, _, stderr = cli("import", badFile, "-o", "wide")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--output=wide: want one of json, yaml")
	_, err = clusters.Get(ctx, "member-9", metav1.GetOptions{})
	require.Error(t, err, "a Cluster with an inline credential was imported")
	t.Logf("\n%s", stderr)
}

// import --from-kubeconfig makes a Cluster of each context that can be one, pointing at the
// file's credentials rather than copying them; a tool reaches the member through the pointer;
// contexts with no server or a name that cannot be a Cluster's are named and not imported.
func TestImportFromKubeconfig(t *testing.T) {
	realservers.Required(t)
	lf := sharedSet(t)
	ctx := t.Context()
	kubeconfig := userKubeconfig(t, lf, map[string]*localfleet.Member{"alpha": lf.Members[0]})
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	cfg.Clusters["serverless"] = &clientcmdapi.Cluster{}
	cfg.Contexts["serverless"] = &clientcmdapi.Context{Cluster: "serverless", AuthInfo: "alpha"}
	cfg.Contexts["Not_A_Name"] = &clientcmdapi.Context{Cluster: "alpha", AuthInfo: "alpha"}
	cfg.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "missing", AuthInfo: "alpha"}
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))

	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace, "import", "--from-kubeconfig", kubeconfig}, &stdout, &stderr)
	out := stdout.String()
	require.Equal(t, 1, code, "%s%s", out, stderr.String())
	require.Contains(t, out, `context "serverless": its cluster "serverless" has no server; not imported`)
	require.Contains(t, out, `context "Not_A_Name": not a valid Cluster name (`)
	require.Contains(t, out, `context "nowhere": names cluster "missing", which the file does not define; not imported`)
	require.Contains(t, out, "cluster "+lf.Namespace+"/alpha: created")
	require.Contains(t, out, "cluster "+lf.Namespace+"/registry: created")
	require.Contains(t, stderr.String(), "some Clusters were not imported: 3 of 5")

	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	alpha, err := clusters.Get(ctx, "alpha", metav1.GetOptions{})
	require.NoError(t, err)
	stored, err := json.Marshal(alpha)
	require.NoError(t, err)
	user := cfg.AuthInfos["alpha"]
	for _, secret := range [][]byte{user.ClientKeyData, user.ClientCertificateData, []byte(user.Token)} {
		if len(secret) > 0 {
			require.NotContains(t, string(stored), string(secret), "a credential of the kubeconfig was copied into the registry")
			require.NotContains(t, string(stored), base64.StdEncoding.EncodeToString(secret), "a credential of the kubeconfig was copied into the registry")
		}
	}
	// The importer, allowing the file, reaches the member through the Cluster.
	resolver, err := access.NewResolver(access.ResolverOptions{
		FileRoots: []access.FileRoot{{Dir: filepath.Dir(kubeconfig), SendTo: access.Servers(lf.Members[0].URL())}},
	})
	require.NoError(t, err)
	member, err := resolver.Config(ctx, alpha)
	require.NoError(t, err)
	ns, err := kubernetes.NewForConfigOrDie(member).CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	require.NoError(t, err)
	want, err := kubernetes.NewForConfigOrDie(lf.Members[0].Config).CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, want.UID, ns.UID)

	// On the same registry, to spare the test run one of its own.
	t.Run("get and describe do not drive the terminal", func(t *testing.T) { getAndDescribeDoNotDriveTheTerminal(t, lf) })
}

// import --shard-buckets labels each Cluster with its shard bucket, unless it names one, and
// export then import labels those already registered; without it, the file is applied as it is.
func TestImportShardBuckets(t *testing.T) {
	lf, cli, clusters := registeredSet(t)
	ctx := t.Context()
	code, exported, stderr := cli("export")
	require.Equal(t, 0, code, stderr)
	var list v1alpha1.ClusterList
	require.NoError(t, yaml.Unmarshal([]byte(exported), &list))
	list.Items[1].Labels = map[string]string{"fleet": "local", shard.BucketLabel: "5"}
	data, err := yaml.Marshal(list)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o600))

	code, out, stderr := cli("import", file)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	c, err := clusters.Get(ctx, "member-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"fleet": "local"}, c.Labels, "import without --shard-buckets labelled a Cluster")

	code, out, stderr = cli("import", file, "--shard-buckets")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "cluster "+lf.Namespace+"/member-1: configured")
	for name, bucket := range map[string]string{"member-1": shard.BucketOf(lf.Namespace, "member-1"), "member-2": "5"} {
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"fleet": "local", shard.BucketLabel: bucket}, c.Labels, name)
	}
}

// registeredSet is a cluster set of the test's own, with member-1 and member-2 registered: the
// command line over it, and its Clusters.
func registeredSet(t *testing.T) (*localfleet.Fleet, func(args ...string) (int, string, string), crv1alpha1.ClusterInterface) {
	t.Helper()
	realservers.Required(t)
	lf := sharedSet(t, "member-1", "member-2")
	cli := commandLine(t.Context(), lf.Registry.Kubeconfig, lf.Namespace)
	return lf, cli, versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
}
