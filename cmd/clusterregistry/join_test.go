package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
)

// userKubeconfig is a kubeconfig as a user would have one: a context for the registry and one
// per member, each with its administrator's credentials.
func userKubeconfig(t *testing.T, lf *localfleet.Fleet, members map[string]*localfleet.Member) string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	add := func(name, path string) {
		cfg, err := clientcmd.LoadFromFile(path)
		require.NoError(t, err)
		ctx := cfg.Contexts[cfg.CurrentContext]
		merged.Clusters[name] = cfg.Clusters[ctx.Cluster]
		merged.AuthInfos[name] = cfg.AuthInfos[ctx.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	add("registry", lf.Registry.Kubeconfig)
	for name, m := range members {
		add(name, m.Kubeconfig)
	}
	merged.CurrentContext = "registry"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*merged, path))
	return path
}

// join registers two clusters of a user's kubeconfig; tools reach them through the registry with
// the pinned tokens join made; a second join updates, a name taken by another server is refused.
func TestJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kube-apiserver and etcd; run without -short")
	}
	lf := localfleet.StartForTest(t, localfleet.Options{Members: 2})
	ctx := t.Context()
	kubeconfig := userKubeconfig(t, lf, map[string]*localfleet.Member{"alpha": lf.Members[0], "beta": lf.Members[1]})
	cli := commandLine(ctx, kubeconfig, "joined")
	code, _, stderr := cli("install", "--create-namespace")
	require.Equal(t, 0, code, stderr)

	// A dry run checks and says what it would do, and does nothing; so does a role the member lacks.
	code, out, stderr := cli("join", "alpha", "--dry-run", "--labels", "env=test")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "registry: Cluster joined/alpha would be created (server dry run)")
	code, _, stderr = cli("join", "alpha", "--cluster-role", "no-such-role")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `member: ClusterRole "no-such-role" does not exist on `+lf.Members[0].URL()+" (nothing was done)")
	_, err := kubernetes.NewForConfigOrDie(lf.Members[0].Config).CoreV1().ServiceAccounts("kube-system").Get(ctx, "clusterregistry-alpha", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a dry run or refused join made a service account: %v", err)

	for _, name := range []string{"alpha", "beta"} {
		code, out, stderr = cli("join", name, "--labels", "env=test,joined=yes", "--cluster-role", "cluster-admin")
		require.Equal(t, 0, code, "%s%s", out, stderr)
		require.Contains(t, out, "registry: Cluster joined/"+name+" created")
	}
	code, out, stderr = cli("join", "alpha", "--labels", "env=test,joined=yes", "--cluster-role", "cluster-admin")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "registry: Cluster joined/alpha unchanged", "a second join duplicated or changed the Cluster")
	// -o: the Cluster on stdout, as the registry has it, and the report on stderr.
	code, out, stderr = cli("join", "alpha", "--labels", "env=test,joined=yes", "--cluster-role", "cluster-admin", "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "registry: Cluster joined/alpha unchanged")
	var printed v1alpha1.Cluster
	require.NoError(t, json.Unmarshal([]byte(out), &printed), out)
	require.Equal(t, "Cluster", printed.Kind)
	require.Equal(t, "alpha", printed.Name)
	require.Equal(t, lf.Members[0].URL(), printed.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress)
	require.Empty(t, printed.ManagedFields)
	code, out, stderr = cli("join", "beta", "--dry-run", "-o", "name")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "cluster.clusterregistry.k8s.io/beta\n", out)

	// A tool reaches each member through the registry alone.
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	resolver, err := multicluster.NewResolver(multicluster.ResolverOptions{Secrets: multicluster.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config))})
	require.NoError(t, err)
	list, err := registry.ClusterregistryV1alpha1().Clusters("joined").List(ctx, metav1.ListOptions{LabelSelector: "joined=yes"})
	require.NoError(t, err)
	require.Len(t, list.Items, 2)
	results := multicluster.Map(ctx, multicluster.StaticFleet(resolver, list.Items, multicluster.FleetOptions{}).Members(),
		func(ctx context.Context, m *multicluster.Member) (string, error) {
			kube, err := m.Kubernetes(ctx)
			if err != nil {
				return "", err
			}
			ns, err := kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return string(ns.UID), nil
		})
	require.NoError(t, results.Err())
	secret, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets("joined").Get(ctx, "alpha-token", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, lf.Members[0].URL(), secret.Annotations[v1alpha1.ServersAnnotation])

	// Refused, with what to do.
	code, _, stderr = cli("join", "beta", "--name", "alpha")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "cluster joined/alpha already exists for another server; choose another --name, or unjoin it first")
	code, _, stderr = cli("join", "gamma")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `context "gamma" is not in the kubeconfig (it has: alpha, beta, registry)`)
	require.False(t, strings.Contains(stderr, "Bearer"))

	// A member that does not answer, and a context whose cluster has no server: nothing is made.
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	down := cfg.Clusters["alpha"].DeepCopy()
	down.Server = "https://127.0.0.1:1"
	cfg.Clusters["down"], cfg.Contexts["down"] = down, &clientcmdapi.Context{Cluster: "down", AuthInfo: "alpha"}
	cfg.Clusters["serverless"] = &clientcmdapi.Cluster{CertificateAuthorityData: down.CertificateAuthorityData}
	cfg.Contexts["serverless"] = &clientcmdapi.Context{Cluster: "serverless", AuthInfo: "alpha"}
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))
	code, _, stderr = cli("join", "down")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "member: reaching https://127.0.0.1:1 to read ClusterRole edit (nothing was done)")
	require.Contains(t, stderr, "connection refused")
	code, _, stderr = cli("join", "serverless")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `context "serverless": `)
	require.Contains(t, stderr, "server")
	for _, name := range []string{"down", "serverless"} {
		_, err = registry.ClusterregistryV1alpha1().Clusters("joined").Get(ctx, name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a failed join registered %s: %v", name, err)
	}

	// unjoin leaves nothing behind on either side; a second unjoin finds it all gone.
	code, out, stderr = cli("unjoin", "alpha")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Equal(t, 4, strings.Count(out, " deleted\n"), out)
	memberKube := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	_, err = memberKube.CoreV1().ServiceAccounts("kube-system").Get(ctx, "clusterregistry-alpha", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "service account left on the member: %v", err)
	_, err = memberKube.RbacV1().ClusterRoleBindings().Get(ctx, "clusterregistry-alpha", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "binding left on the member: %v", err)
	_, err = registry.ClusterregistryV1alpha1().Clusters("joined").Get(ctx, "alpha", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "Cluster left in the registry: %v", err)
	_, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets("joined").Get(ctx, "alpha-token", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "Secret left in the registry: %v", err)
	code, out, _ = cli("unjoin", "alpha")
	require.Equal(t, 0, code)
	require.Equal(t, 4, strings.Count(out, ": already gone\n"), out)
}
