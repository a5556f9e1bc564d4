package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/trustflags"
	"github.com/cluster-registry/sdk/tunnel"
)

// kubeconfigExport says how export writes each Cluster's exec entry.
type kubeconfigExport struct {
	command string   // clusterregistry's path
	args    []string // after "credential NAME --namespace=NS": the registry's and the trust flags
	qualify bool     // name contexts namespace/name (with -A)
	prefix  string   // before each context's name, so that they do not collide with the user's own
	output  string   // yaml or json
	// tunnelProxy is where clusterregistry tunnel-proxy listens, for tunnelled members' proxy-url;
	// without it they are left out, as kubectl could not reach them.
	tunnelProxy string
}

// exportKubeconfig writes a kubeconfig with a context per Cluster that resolves here, each
// verified as the Resolver verifies it and authenticated by clusterregistry credential. Clusters
// that do not resolve are named on errOut and left out.
func exportKubeconfig(ctx context.Context, out, errOut io.Writer, resolver *access.Resolver, clusters []v1alpha1.Cluster, o kubeconfigExport) error {
	cfg := clientcmdapi.NewConfig()
	failed := 0
	for i := range clusters {
		c := &clusters[i]
		name := c.Name
		if o.qualify {
			name = c.Namespace + "/" + c.Name
		}
		name = o.prefix + name
		resolved, err := resolver.Resolve(ctx, c)
		if err != nil {
			fmt.Fprintf(errOut, "not exported: %v\n", trustflags.InFlagTerms(err)) // a *access.ClusterError names the Cluster
			failed++
			continue
		}
		cluster := &clientcmdapi.Cluster{
			Server:                   resolved.Server.String(),
			CertificateAuthorityData: resolved.Config.CAData,
			TLSServerName:            resolved.Config.ServerName,
		}
		if t := c.Spec.KubernetesAPIEndpoints.Tunnel; t != nil {
			if o.tunnelProxy == "" {
				fmt.Fprintf(errOut, "not exported: cluster %s/%s is reached through tunnel agent %q: give --tunnel-proxy, where clusterregistry tunnel-proxy listens\n", c.Namespace, c.Name, t.Agent)
				failed++
				continue
			}
			cluster.ProxyURL = tunnel.ProxyURL(o.tunnelProxy, c.Namespace, c.Name)
		}
		cfg.Clusters[name] = cluster
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1",
			Command:    o.command,
			Args:       append([]string{"credential", c.Name, "--namespace=" + c.Namespace}, o.args...),
			Env:        []clientcmdapi.ExecEnvVar{}, // written "env: []", not "env: null"
			// credential checks the server and CA kubectl will use against the resolved ones.
			ProvideClusterInfo: true,
			InteractiveMode:    clientcmdapi.NeverExecInteractiveMode,
		}}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
	}
	data, err := clientcmd.Write(*cfg)
	if err == nil && o.output == "json" {
		// clientcmd's codec writes YAML whatever it is asked for: convert, and indent as kubectl does.
		var indented bytes.Buffer
		if data, err = yaml.YAMLToJSON(data); err == nil {
			err = json.Indent(&indented, data, "", "  ")
			data = append(indented.Bytes(), '\n')
		}
	}
	if err != nil {
		return err
	}
	if _, err := out.Write(data); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d Clusters not exported, named above; the kubeconfig holds the others", failed, len(clusters))
	}
	return nil
}

// registryArgs are the flags by which clusterregistry credential reaches the registry as export
// does now: the kubeconfig file by its absolute path and the context by name, so that neither a
// later change of current context nor KUBECONFIG pointing at the exported file redirects it.
func registryArgs(registry *genericclioptions.ConfigFlags) ([]string, error) {
	loader := registry.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	context := raw.CurrentContext
	if registry.Context != nil && *registry.Context != "" {
		context = *registry.Context
	}
	if context == "" {
		return nil, errors.New("the kubeconfig names no current context for the registry; give --context")
	}
	var path string
	if registry.KubeConfig != nil && *registry.KubeConfig != "" {
		path = *registry.KubeConfig
	} else {
		// KUBECONFIG may list several files: the one that defines the context is the one to name.
		for _, file := range loader.ConfigAccess().GetLoadingPrecedence() {
			if cfg, err := clientcmd.LoadFromFile(file); err == nil && cfg.Contexts[context] != nil {
				path = file
				break
			}
		}
		if path == "" {
			return nil, fmt.Errorf("no kubeconfig file defines context %q; give --kubeconfig", context)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("the registry's kubeconfig: %w", err)
	}
	return []string{"--kubeconfig=" + abs, "--context=" + context}, nil
}
