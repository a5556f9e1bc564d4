package access

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

func builtinProviders() map[string]Provider {
	return map[string]Provider{
		v1alpha1.ProviderTypeSecret:           ProviderFunc(secretCredentials),
		v1alpha1.ProviderTypeKubeconfigSecret: ProviderFunc(kubeconfigSecretCredentials),
		v1alpha1.ProviderTypeKubeconfigFile:   ProviderFunc(kubeconfigFileCredentials),
		v1alpha1.ProviderTypeExec:             ProviderFunc(execCredentials),
		v1alpha1.ProviderTypeTokenFile:        ProviderFunc(tokenFileCredentials),
	}
}

// secretCredentials reads a bearer token ("token"), or a client certificate and key ("tls.crt",
// "tls.key"), from a Secret: the shapes of service account token and TLS Secrets. "ca.crt", when
// present, verifies the member if the Cluster has no caBundle.
func secretCredentials(ctx context.Context, req *Request) (*Credentials, error) {
	ref, _ := SecretOf(req.Cluster, *req.Provider) // a zero ref is refused by Secret, naming config.name
	s, err := req.Secret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	if err := req.CheckPinned(s); err != nil {
		return nil, err
	}
	creds := &Credentials{CAData: clone(s.Data[v1alpha1.SecretCAKey])}
	switch {
	case len(strings.TrimSpace(string(s.Data[v1alpha1.SecretTokenKey]))) > 0:
		creds.BearerToken = strings.TrimSpace(string(s.Data[v1alpha1.SecretTokenKey]))
	case len(s.Data[v1alpha1.SecretCertKey]) > 0 && len(s.Data[v1alpha1.SecretKeyKey]) > 0:
		creds.CertData, creds.KeyData = clone(s.Data[v1alpha1.SecretCertKey]), clone(s.Data[v1alpha1.SecretKeyKey])
	default:
		return nil, fmt.Errorf("Secret %s/%s has neither a token nor tls.crt and tls.key (keys: %s)",
			s.Namespace, s.Name, strings.Join(sortedKeys(s.Data), ", "))
	}
	return creds, nil
}

// execCredentials runs a client.authentication.k8s.io exec plugin, never interactively, by the
// caller's ResolverOptions.ExecPlugins. Config: "command", "args" (a JSON array, or words separated
// by spaces), "env" (a JSON object, or NAME=VALUE words), "apiVersion" (default
// client.authentication.k8s.io/v1), "provideClusterInfo" ("true" passes the member's server and CA
// to the plugin), and "clusterConfig" (a JSON object the plugin may get as its cluster config, if
// its ExecPlugin passes it on). A Cluster's "installHint" is not used: see ExecPlugin.InstallHint.
func execCredentials(_ context.Context, req *Request) (*Credentials, error) {
	spec := ExecSpec{
		Command:       req.Config("command", ""),
		APIVersion:    req.Config("apiVersion", ""),
		ClusterConfig: json.RawMessage(req.Config("clusterConfig", "")),
	}
	var err error
	if spec.Args, err = parseArgs(req.Config("args", "")); err != nil {
		return nil, fmt.Errorf("config.args: %w", err)
	}
	if spec.Env, err = parseEnv(req.Config("env", "")); err != nil {
		return nil, fmt.Errorf("config.env: %w", err)
	}
	if v := req.Config("provideClusterInfo", ""); v != "" {
		if spec.ProvideClusterInfo, err = strconv.ParseBool(v); err != nil {
			return nil, errors.New("config.provideClusterInfo is not true or false")
		}
	}
	exec, err := req.exec(spec, "config", false)
	if err != nil {
		return nil, err
	}
	return &Credentials{Exec: exec}, nil
}

// tokenFileCredentials sends the bearer token in the file at config "path", which must lie under
// one of ResolverOptions.FileRoots whose SendTo allows the member's server. The file is reread as
// it changes, as a projected service account token is.
func tokenFileCredentials(_ context.Context, req *Request) (*Credentials, error) {
	path, err := req.CredentialFile(req.Config("path", ""))
	if err != nil {
		return nil, fmt.Errorf("config.path: %w", err)
	}
	data, err := readResolved(path)
	if err != nil {
		return nil, fmt.Errorf("config.path: %w", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("config.path: the token file is empty")
	}
	sum := sha256.Sum256(data)
	return &Credentials{TokenFile: path, Revision: hex.EncodeToString(sum[:])}, nil
}

// parseArgs reads a JSON array of strings, or words separated by white space.
func parseArgs(s string) ([]string, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "[") {
		var args []string
		if err := json.Unmarshal([]byte(s), &args); err != nil {
			return nil, errors.New("not a JSON array of strings")
		}
		return args, nil
	}
	return strings.Fields(s), nil
}

// parseEnv reads a JSON object of strings, or NAME=VALUE words separated by white space.
func parseEnv(s string) ([]clientcmdapi.ExecEnvVar, error) {
	var env []clientcmdapi.ExecEnvVar
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		var m map[string]string
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			return nil, errors.New("not a JSON object of strings")
		}
		for _, k := range sortedKeys(m) {
			if k == "" {
				return nil, errors.New("a variable has an empty name")
			}
			env = append(env, clientcmdapi.ExecEnvVar{Name: k, Value: m[k]})
		}
		return env, nil
	}
	for _, word := range strings.Fields(s) {
		name, value, ok := strings.Cut(word, "=")
		if !ok || name == "" {
			// Not quoted: a word without "=" may be a pasted secret.
			return nil, errors.New("a word is not NAME=VALUE")
		}
		env = append(env, clientcmdapi.ExecEnvVar{Name: name, Value: value})
	}
	return env, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}
