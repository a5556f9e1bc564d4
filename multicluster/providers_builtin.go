package multicluster

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
	s, err := req.Secret(ctx, req.Config("namespace", ""), req.Config("name", ""))
	if err != nil {
		return nil, err
	}
	if err := req.CheckPinned(s); err != nil {
		return nil, err
	}
	creds := &Credentials{CAData: clone(s.Data["ca.crt"])}
	switch {
	case len(strings.TrimSpace(string(s.Data["token"]))) > 0:
		creds.BearerToken = strings.TrimSpace(string(s.Data["token"]))
	case len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0:
		creds.CertData, creds.KeyData = clone(s.Data["tls.crt"]), clone(s.Data["tls.key"])
	default:
		return nil, fmt.Errorf("Secret %s/%s has neither a token nor tls.crt and tls.key (keys: %s)",
			s.Namespace, s.Name, strings.Join(sortedKeys(s.Data), ", "))
	}
	return creds, nil
}

// execCredentials runs a client.authentication.k8s.io exec plugin, never interactively. Config:
// "command" (which ResolverOptions.ExecCommands must allow), "args" (a JSON array, or words separated by
// spaces), "env" (a JSON object, or NAME=VALUE words), "apiVersion" (default
// client.authentication.k8s.io/v1), "provideClusterInfo" ("true" passes the member's server and CA
// to the plugin), "installHint".
func execCredentials(_ context.Context, req *Request) (*Credentials, error) {
	command := req.Config("command", "")
	if err := req.CheckExec(command); err != nil {
		return nil, err
	}
	args, err := parseArgs(req.Config("args", ""))
	if err != nil {
		return nil, fmt.Errorf("config.args: %w", err)
	}
	env, err := parseEnv(req.Config("env", ""))
	if err != nil {
		return nil, fmt.Errorf("config.env: %w", err)
	}
	for _, e := range env {
		if !slices.Contains(req.resolver.opts.ExecEnv, e.Name) {
			return nil, fmt.Errorf("%w: config.env sets %s, which is not in ResolverOptions.ExecEnv", ErrNotAllowed, e.Name)
		}
	}
	provideClusterInfo := false
	if v := req.Config("provideClusterInfo", ""); v != "" {
		if provideClusterInfo, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("config.provideClusterInfo %q is not true or false", v)
		}
	}
	return &Credentials{Exec: &clientcmdapi.ExecConfig{
		Command:            command,
		Args:               args,
		Env:                env,
		APIVersion:         req.Config("apiVersion", "client.authentication.k8s.io/v1"),
		ProvideClusterInfo: provideClusterInfo,
		InstallHint:        req.Config("installHint", ""),
		InteractiveMode:    clientcmdapi.NeverExecInteractiveMode,
	}}, nil
}

// tokenFileCredentials sends the bearer token in the file at config "path", which must lie under
// ResolverOptions.FileRoots. The file is reread as it changes, as a projected service account token is.
func tokenFileCredentials(_ context.Context, req *Request) (*Credentials, error) {
	path, data, err := req.ReadFile(req.Config("path", ""))
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, fmt.Errorf("token file %s is empty", path)
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
