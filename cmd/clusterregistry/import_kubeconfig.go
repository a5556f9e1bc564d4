package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// clustersFromKubeconfig makes a Cluster of each context of the kubeconfig at path, named after
// the context. A Cluster points at credentials and never holds them: it gets the context's exec
// plugin, if its user runs one (each reader runs it as themselves), and a kubeconfig-file
// provider naming this file and context (for readers on this machine who allow the file with
// --file-root). problems name the contexts that cannot be Clusters, and why; notes what was left
// out of those that can (with dropCredentialArgs, the plugin arguments that pass a credential).
func clustersFromKubeconfig(path string, dropCredentialArgs bool) (clusters []v1alpha1.Cluster, problems, notes []string, err error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: not a kubeconfig: %w", path, err)
	}
	if err := clientcmd.ResolveLocalPaths(cfg); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(cfg.Contexts) == 0 {
		return nil, nil, nil, fmt.Errorf("%s: the kubeconfig has no contexts", path)
	}
	for _, name := range sortedKeys(cfg.Contexts) {
		c, dropped, err := clusterFromContext(cfg, name, abs, dropCredentialArgs)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: context %q: %v; not imported", path, name, err))
			continue
		}
		clusters = append(clusters, *c)
		for _, d := range dropped {
			notes = append(notes, fmt.Sprintf("%s: context %q: the exec plugin's argument %s was left out, as it passes a credential", path, name, d))
		}
	}
	return clusters, problems, notes, nil
}

func clusterFromContext(cfg *clientcmdapi.Config, name, path string, dropCredentialArgs bool) (_ *v1alpha1.Cluster, dropped []string, err error) {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, nil, fmt.Errorf("not a valid Cluster name (%s); rename the context (kubectl config rename-context)", strings.Join(errs, "; "))
	}
	kctx := cfg.Contexts[name]
	cluster := cfg.Clusters[kctx.Cluster]
	switch {
	case cluster == nil:
		return nil, nil, fmt.Errorf("names cluster %q, which the file does not define", kctx.Cluster)
	case cluster.Server == "":
		return nil, nil, fmt.Errorf("its cluster %q has no server", kctx.Cluster)
	}
	ca := cluster.CertificateAuthorityData
	if len(ca) == 0 && cluster.CertificateAuthority != "" {
		if ca, err = os.ReadFile(cluster.CertificateAuthority); err != nil {
			return nil, nil, fmt.Errorf("its cluster's certificate-authority: %w", err)
		}
	}
	var providers []v1alpha1.AuthProviderConfig
	if user := cfg.AuthInfos[kctx.AuthInfo]; user != nil && user.Exec != nil {
		var exec v1alpha1.AuthProviderConfig
		if exec, dropped, err = execProvider(user.Exec, dropCredentialArgs); err != nil {
			return nil, nil, err
		}
		providers = append(providers, exec)
	}
	providers = append(providers, v1alpha1.AuthProviderConfig{
		Name: "kubeconfig-file", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeKubeconfigFile},
		Config: map[string]string{"path": path, "context": name},
	})
	return &v1alpha1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: cluster.Server}},
				CABundle:        ca,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: providers},
		},
	}, dropped, nil
}
