package trustflags

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Flags are the trust flags' values. The zero value trusts nothing; AddFlags binds it to a flag set.
type Flags struct {
	// Prefer lists provider types in order of preference (--prefer).
	Prefer []string
	// AllowExec lists commands that Clusters may name, run with no arguments of the Cluster's
	// (--allow-exec).
	AllowExec []string
	// AllowExecArgs lists commands with the arguments Clusters may give them, each as words: the
	// command, then ExecPlugin.ArgsPattern's elements (--allow-exec-args).
	AllowExecArgs []string
	// AllowExecAnyArgs lists commands that Clusters may run with any arguments
	// (--allow-exec-any-args): ExecPlugin.ClusterArgs.
	AllowExecAnyArgs []string
	// FileRoots lists directories that token-file and kubeconfig-file providers may read
	// (--file-root).
	FileRoots []string
	// SendTo lists the API servers that this machine's credentials may be sent to, or "*" for any
	// (--send-to).
	SendTo []string

	// TunnelServer is the tunnel server's frontend, as host:port, through which members whose
	// Clusters say so are reached (--tunnel-server); TunnelCA verifies it, and TunnelCert and
	// TunnelKey are the client certificate it asks for (--tunnel-ca, --tunnel-cert, --tunnel-key).
	TunnelServer, TunnelCA, TunnelCert, TunnelKey string
}

// Flag names, for callers that check which were set.
const (
	FlagPrefer           = "prefer"
	FlagAllowExec        = "allow-exec"
	FlagAllowExecArgs    = "allow-exec-args"
	FlagAllowExecAnyArgs = "allow-exec-any-args"
	FlagFileRoot         = "file-root"
	FlagSendTo           = "send-to"
	FlagTunnelServer     = "tunnel-server"
	FlagTunnelCA         = "tunnel-ca"
	FlagTunnelCert       = "tunnel-cert"
	FlagTunnelKey        = "tunnel-key"
)

// Names are every trust flag's name.
var Names = []string{FlagPrefer, FlagAllowExec, FlagAllowExecArgs, FlagAllowExecAnyArgs, FlagFileRoot, FlagSendTo,
	FlagTunnelServer, FlagTunnelCA, FlagTunnelCert, FlagTunnelKey}

// AddFlags binds the flags to fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.Prefer, FlagPrefer, f.Prefer,
		"provider types to use, in order of preference, e.g. secret,kubeconfig-secret (default: each Cluster's own order)")
	fs.StringSliceVar(&f.AllowExec, FlagAllowExec, f.AllowExec,
		"exec plugin commands that Clusters may name, run with no arguments of the Cluster's; with arguments, see --"+FlagAllowExecArgs+" (default: none)")
	fs.StringArrayVar(&f.AllowExecArgs, FlagAllowExecArgs, f.AllowExecArgs,
		`an exec plugin command that Clusters may name, and the arguments they may give it, as words (quoted as in a shell): each word as it must be, `+
			`"*" for any one value (never a flag), "--flag=*" for any value of that flag; e.g. 'aws eks get-token --cluster-name * --region *'. Repeatable`)
	fs.StringSliceVar(&f.AllowExecAnyArgs, FlagAllowExecAnyArgs, f.AllowExecAnyArgs,
		"DANGEROUS: exec plugin commands that Clusters may run with any arguments. Whoever can edit a Cluster in the set then runs the command "+
			"as you, with arguments of their choosing, whatever it does besides printing a credential. Prefer --"+FlagAllowExecArgs)
	fs.StringSliceVar(&f.FileRoots, FlagFileRoot, f.FileRoots,
		"directories that token-file and kubeconfig-file providers may read (default: none)")
	fs.StringSliceVar(&f.SendTo, FlagSendTo, f.SendTo,
		"API servers that this machine's credentials (exec plugins, --file-root files) may be sent to, or * for any server "+
			"(only for plugins whose credentials are bound to the server they are given); a kubeconfig file's own server always counts (default: none)")
	f.AddTunnelFlags(fs)
}

// AddTunnelFlags adds the tunnel's flags alone, for a command that reaches members through the
// tunnel without resolving their credentials (clusterregistry tunnel-proxy).
func (f *Flags) AddTunnelFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.TunnelServer, FlagTunnelServer, f.TunnelServer,
		"the tunnel server's frontend (host:port) through which members whose Cluster names a tunnel agent are reached; needs --"+
			FlagTunnelCA+", --"+FlagTunnelCert+" and --"+FlagTunnelKey+" (default: such members are not reached)")
	fs.StringVar(&f.TunnelCA, FlagTunnelCA, f.TunnelCA, "file holding the CA that verifies the tunnel server's frontend")
	fs.StringVar(&f.TunnelCert, FlagTunnelCert, f.TunnelCert, "file holding the client certificate the tunnel server's frontend asks for")
	fs.StringVar(&f.TunnelKey, FlagTunnelKey, f.TunnelKey, "file holding the key of --"+FlagTunnelCert)
}

// ResolverOptions are the ResolverOptions the flags describe, or an error naming each flag at
// fault. The caller adds Secrets and the rest.
func (f *Flags) ResolverOptions() (access.ResolverOptions, error) {
	var o access.ResolverOptions
	var errs []error
	known := []string{v1alpha1.ProviderTypeSecret, v1alpha1.ProviderTypeKubeconfigSecret, v1alpha1.ProviderTypeKubeconfigFile,
		v1alpha1.ProviderTypeExec, v1alpha1.ProviderTypeTokenFile}
	for _, p := range f.Prefer {
		if !slices.Contains(known, p) {
			errs = append(errs, fmt.Errorf("--%s: unknown provider type %q (known: %s)", FlagPrefer, p, strings.Join(known, ", ")))
		}
	}
	o.Prefer = slices.Clone(f.Prefer)

	var to access.ServerMatcher
	switch {
	case slices.Equal(f.SendTo, []string{"*"}):
		to = access.AnyServer()
	case slices.Contains(f.SendTo, "*"):
		errs = append(errs, fmt.Errorf("--%s: * stands for every server, so it cannot be listed with others", FlagSendTo))
	case len(f.SendTo) > 0:
		for _, s := range f.SendTo {
			if _, err := access.ServerURL(s); err != nil {
				errs = append(errs, fmt.Errorf("--%s %q: %w", FlagSendTo, s, err))
			}
		}
		to = access.Servers(f.SendTo...)
	}

	for _, command := range f.AllowExec {
		if command == "" || strings.ContainsAny(command, " \t") {
			errs = append(errs, fmt.Errorf("--%s %q: want a command alone; a command with arguments goes in --%s", FlagAllowExec, command, FlagAllowExecArgs))
			continue
		}
		o.ExecPlugins = append(o.ExecPlugins, access.ExecPlugin{Command: command, SendTo: to})
	}
	for _, spec := range f.AllowExecArgs {
		words, err := splitWords(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", FlagAllowExecArgs, spec, err))
			continue
		}
		if len(words) == 0 {
			errs = append(errs, fmt.Errorf("--%s is empty: give a command and the arguments Clusters may give it", FlagAllowExecArgs))
			continue
		}
		o.ExecPlugins = append(o.ExecPlugins, access.ExecPlugin{Command: words[0], ArgsPattern: words[1:], SendTo: to})
	}
	for _, command := range f.AllowExecAnyArgs {
		if command == "" || strings.ContainsAny(command, " \t") {
			errs = append(errs, fmt.Errorf("--%s %q: want a command alone", FlagAllowExecAnyArgs, command))
			continue
		}
		o.ExecPlugins = append(o.ExecPlugins, access.ExecPlugin{Command: command, ClusterArgs: true, SendTo: to})
	}
	for _, dir := range f.FileRoots {
		if dir == "" {
			errs = append(errs, fmt.Errorf("--%s is empty: give a directory", FlagFileRoot))
			continue
		}
		o.FileRoots = append(o.FileRoots, access.FileRoot{Dir: dir, SendTo: to})
	}
	tunnel, err := f.TunnelDialer()
	if err != nil {
		errs = append(errs, err)
	} else if tunnel != nil {
		o.Tunnel = tunnel
	}
	return o, errors.Join(errs...)
}

// ToResolver is the Resolver the flags describe, as kubectl's ConfigFlags.ToRESTConfig is the
// config its flags describe: Secrets are read through registry, with its permissions (the
// caller's own), and members see userAgent. Its error names each flag at fault.
func (f *Flags) ToResolver(registry kubernetes.Interface, userAgent string) (*access.Resolver, error) {
	opts, err := f.ResolverOptions()
	if err != nil {
		return nil, err
	}
	opts.Secrets = access.SecretsFromClient(registry)
	opts.UserAgent = userAgent
	r, err := access.NewResolver(opts)
	return r, InFlagTerms(err)
}

// Args are the flags again, one element per value, for a command line that another program runs
// (the exec entries of a kubeconfig, say): a pattern of --allow-exec-args stays one element.
func (f *Flags) Args() []string {
	var args []string
	for _, flag := range []struct {
		name   string
		values []string
	}{
		{FlagPrefer, f.Prefer}, {FlagAllowExec, f.AllowExec}, {FlagAllowExecArgs, f.AllowExecArgs},
		{FlagAllowExecAnyArgs, f.AllowExecAnyArgs}, {FlagFileRoot, f.FileRoots}, {FlagSendTo, f.SendTo},
		{FlagTunnelServer, nonEmpty(f.TunnelServer)}, {FlagTunnelCA, nonEmpty(f.TunnelCA)},
		{FlagTunnelCert, nonEmpty(f.TunnelCert)}, {FlagTunnelKey, nonEmpty(f.TunnelKey)},
	} {
		for _, v := range flag.values {
			args = append(args, "--"+flag.name+"="+v)
		}
	}
	return args
}

// AllowExecArgsFor is the --allow-exec-args flag that allows command with exactly args, quoted
// for a POSIX shell, for commands that tell a user what to allow. ok is false when an argument
// is "*" or ends in "=*", which the flag would read as a wildcard.
func AllowExecArgsFor(command string, args []string) (flag string, ok bool) {
	for _, a := range args {
		if a == "*" || strings.HasSuffix(a, "=*") {
			return "", false
		}
	}
	return "--" + FlagAllowExecArgs + "=" + shellQuote(joinWords(append([]string{command}, args...))), true
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
