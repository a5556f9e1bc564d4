package access

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ExecPlugin lets providers run a client.authentication.k8s.io exec plugin, and says with what
// and for which servers. Every path that runs a plugin (the exec provider type, an exec user in a
// kubeconfig, a custom Provider calling Request.Exec) goes through the same ExecPlugins.
//
// A caller may list one command several times, with different Args and SendTo (one entry per
// cloud account, say): the first entry whose command, args and servers fit is used.
type ExecPlugin struct {
	// Command is the plugin, exactly as providers name it: a path, or a name looked up in PATH.
	Command string
	// Args are the plugin's arguments. A provider that gives none gets these; one that gives
	// some must give exactly these, or fit ArgsPattern, or ClusterArgs must be set.
	Args []string
	// ArgsPattern lets providers choose the plugin's arguments within a pattern of the caller's:
	// the arguments must match it element for element, each element matching an argument equal
	// to it, except "*", which matches any one argument that does not begin with "-" (a value,
	// never a flag of the Cluster editor's choosing), and an element ending in "=*", such as
	// "--region=*", which matches that prefix followed by any value. For example
	// {"eks", "get-token", "--cluster-name", "*", "--region", "*"} lets each Cluster name its
	// cluster and region, and nothing else. MatchArgs is the check.
	ArgsPattern []string
	// ClusterArgs lets providers choose any arguments: whoever can edit a Cluster can then run
	// the command with arguments of their choosing, as the caller, whether or not a credential
	// comes out. Prefer Args or ArgsPattern. (A kubeconfig file of the caller's chooses its own
	// args and env: they are the caller's.)
	ClusterArgs bool
	// Env is set in the plugin's environment, over anything a provider sets.
	Env map[string]string
	// ClusterEnv lists the variables a provider may set. Others are refused: a Cluster that
	// could set LD_PRELOAD or BASH_ENV could run code of its choosing.
	ClusterEnv []string
	// ClusterConfig, when set, gives the plugin ExecCredential.spec.cluster.config (and so turns
	// on provideClusterInfo): see ClusterNameConfig and GivenClusterConfig. When nil the plugin
	// gets no cluster config, whatever the Cluster or kubeconfig gives.
	ClusterConfig ClusterConfigFunc
	// InstallHint is shown when the command is not found. A Cluster's own installHint is not
	// used: what a reader is told to run must come from the reader's side.
	InstallHint string
	// SendTo says to which servers the plugin's credentials may be sent. When nil, they go only
	// where a kubeconfig file of the caller's (type kubeconfig-file) sends them: a Cluster's exec
	// provider cannot use the plugin.
	SendTo ServerMatcher
}

// ClusterConfigFunc returns what an exec plugin gets as ExecCredential.spec.cluster.config for one
// resolution: a JSON object, or nil for none. given is the config the source offers, nil when it
// offers none: a JSON object in the exec provider's "clusterConfig" key, or a kubeconfig cluster's
// client.authentication.k8s.io/exec extension. What it returns is part of the resolution's
// fingerprint: an edit that changes it takes effect at the next revalidation.
type ClusterConfigFunc func(req *Request, given json.RawMessage) (json.RawMessage, error)

// ClusterNameConfig sends {"clusterName": "<the Cluster's name>"}: what SIG-Multicluster's
// ClusterProfile access-provider plugins (cluster-inventory-api's secretreader and
// kubeconfig-secretreader) read to find the cluster's credentials.
func ClusterNameConfig(req *Request, _ json.RawMessage) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"clusterName": req.Cluster.Name})
}

// GivenClusterConfig passes on the config the Cluster's provider or kubeconfig gives, as client-go
// passes on a kubeconfig's client.authentication.k8s.io/exec extension.
func GivenClusterConfig(_ *Request, given json.RawMessage) (json.RawMessage, error) {
	return given, nil
}

// ExecSpec is an exec plugin as a provider asks for it. Request.Exec turns it into an ExecConfig
// by the caller's ExecPlugins.
type ExecSpec struct {
	Command string
	Args    []string
	Env     []clientcmdapi.ExecEnvVar
	// APIVersion is client.authentication.k8s.io/v1 (the default) or v1beta1.
	APIVersion string
	// ProvideClusterInfo gives the plugin the member's server and CA.
	ProvideClusterInfo bool
	// ClusterConfig is the plugin config the source offers for this cluster, a JSON object; the
	// plugin gets it only through its ExecPlugin's ClusterConfig.
	ClusterConfig json.RawMessage
}

// execAPIVersions are the ExecCredential versions client-go speaks.
var execAPIVersions = []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Exec returns the exec config for spec if the caller's ResolverOptions.ExecPlugins allow it: its
// command, its args, each variable it sets, and the request's server. The plugin never reads
// standard input. Errors say which option to set and never repeat a value of the spec, which
// comes from a Cluster or a Secret and may hold a pasted secret.
func (r *Request) Exec(spec ExecSpec) (*clientcmdapi.ExecConfig, error) {
	return r.exec(spec, "config", false)
}

// exec is Exec for the built-in providers: what names the spec in errors, and whether the source
// is the caller's own kubeconfig file. Such a file's server pins its plugin as it pins its other
// credentials, and its args and env are the caller's own; its command must still be listed.
func (r *Request) exec(spec ExecSpec, what string, callerOwned bool) (*clientcmdapi.ExecConfig, error) {
	if spec.Command == "" {
		return nil, fmt.Errorf("%s: an exec command is required", what)
	}
	apiVersion := spec.APIVersion
	if apiVersion == "" {
		apiVersion = execAPIVersions[0]
	}
	if !slices.Contains(execAPIVersions, apiVersion) {
		return nil, fmt.Errorf("%s: the exec apiVersion must be one of %v", what, execAPIVersions)
	}
	for i, e := range spec.Env {
		if !envNameRE.MatchString(e.Name) {
			return nil, fmt.Errorf("%s: exec env variable %d has no valid name (letters, digits and _)", what, i+1)
		}
	}

	plugins := r.resolver.opts.ExecPlugins
	var refusal error = fmt.Errorf("%w: %s: the exec command is not among ResolverOptions.ExecPlugins; add an ExecPlugin for it to run it",
		ErrNotAllowed, what)
	for i := range plugins {
		p := &plugins[i]
		if p.Command != spec.Command {
			continue
		}
		option := fmt.Sprintf("ResolverOptions.ExecPlugins[%d]", i)
		if len(spec.Args) > 0 && !callerOwned && !p.ClusterArgs && !slices.Equal(spec.Args, p.Args) &&
			(p.ArgsPattern == nil || !MatchArgs(p.ArgsPattern, spec.Args)) {
			refusal = fmt.Errorf("%w: %s: the exec args neither equal %s.Args nor fit %s.ArgsPattern",
				ErrNotAllowed, what, option, option)
			continue
		}
		if err := r.callerPinned(option+".SendTo", ""); err != nil && !callerOwned {
			refusal = err
			continue
		}
		if !callerOwned && (p.SendTo == nil || !p.SendTo.MatchServer(r.Cluster, r.Server)) {
			refusal = &PinningError{Option: option + ".SendTo", Server: r.Server.String()}
			continue
		}
		return r.execConfig(p, option, spec, apiVersion, what, callerOwned)
	}
	return nil, refusal
}

func (r *Request) execConfig(p *ExecPlugin, option string, spec ExecSpec, apiVersion, what string, callerOwned bool) (*clientcmdapi.ExecConfig, error) {
	var env []clientcmdapi.ExecEnvVar
	for i, e := range spec.Env {
		if !callerOwned && !slices.Contains(p.ClusterEnv, e.Name) {
			// Not named: a word of a pasted secret can look like a variable.
			return nil, fmt.Errorf("%w: %s: exec env variable %d is not in %s.ClusterEnv", ErrNotAllowed, what, i+1, option)
		}
		if _, set := p.Env[e.Name]; !set {
			env = append(env, e)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Env)) {
		env = append(env, clientcmdapi.ExecEnvVar{Name: name, Value: p.Env[name]})
	}
	args := slices.Clone(spec.Args)
	if len(args) == 0 {
		args = slices.Clone(p.Args)
	}
	exec := &clientcmdapi.ExecConfig{
		Command:            p.Command,
		Args:               args,
		Env:                env,
		APIVersion:         apiVersion,
		ProvideClusterInfo: spec.ProvideClusterInfo,
		InstallHint:        p.InstallHint,
		InteractiveMode:    clientcmdapi.NeverExecInteractiveMode,
		// client-go checks the command again when it runs it.
		PluginPolicy: clientcmdapi.PluginPolicy{
			PolicyType: clientcmdapi.PluginPolicyAllowlist,
			Allowlist:  []clientcmdapi.AllowlistEntry{{Command: p.Command}},
		},
	}
	if p.ClusterConfig != nil {
		given := spec.ClusterConfig
		if len(given) > 0 && !isJSONObject(given) {
			return nil, fmt.Errorf("%s: the exec cluster config is not a JSON object", what)
		}
		config, err := p.ClusterConfig(r, given)
		if err != nil {
			return nil, fmt.Errorf("%s.ClusterConfig: %w", option, err)
		}
		if len(config) > 0 {
			if !isJSONObject(config) {
				return nil, fmt.Errorf("%s.ClusterConfig returned something other than a JSON object", option)
			}
			exec.Config = &runtime.Unknown{Raw: slices.Clone(config), ContentType: runtime.ContentTypeJSON}
			exec.ProvideClusterInfo = true // the plugin gets the config only with the cluster info
		}
	}
	return exec, nil
}

// MatchArgs reports whether args fit pattern, as ExecPlugin.ArgsPattern says: element for
// element, "*" for any one argument that does not begin with "-", "PREFIX=*" for PREFIX= followed
// by any value, and any other element for an argument equal to it.
func MatchArgs(pattern, args []string) bool {
	if len(pattern) != len(args) {
		return false
	}
	for i, p := range pattern {
		a := args[i]
		switch {
		case p == "*":
			if a == "" || strings.HasPrefix(a, "-") {
				return false
			}
		case strings.HasSuffix(p, "=*"):
			if !strings.HasPrefix(a, strings.TrimSuffix(p, "*")) {
				return false
			}
		case p != a:
			return false
		}
	}
	return true
}

func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) && json.Unmarshal(b, &m) == nil
}

// execClusterConfig is the raw JSON of an exec config's Config, for fingerprints: client-go does
// not serialize it with the rest of the ExecConfig.
func execClusterConfig(exec *clientcmdapi.ExecConfig) []byte {
	if exec == nil || exec.Config == nil {
		return nil
	}
	if u, ok := exec.Config.(*runtime.Unknown); ok {
		return u.Raw
	}
	b, _ := json.Marshal(exec.Config) // a config that does not serialize fingerprints as empty
	return b
}
