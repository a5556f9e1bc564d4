package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// trustFlags are the Resolver's trust options as flags: what this machine lets Clusters, which
// others write, make it read, run and send. health, credential and export take them alike, and
// export writes them into the credential commands it generates.
type trustFlags struct {
	prefer, execs, roots, sendTo []string
}

func (t *trustFlags) addFlags(f *pflag.FlagSet) {
	f.StringSliceVar(&t.prefer, "prefer", nil, "provider types to use, in order of preference (default: each Cluster's own order)")
	f.StringSliceVar(&t.execs, "allow-exec", nil, "exec plugin commands that Clusters may name (default: none)")
	f.StringSliceVar(&t.roots, "file-root", nil, "directories that token-file and kubeconfig-file providers may read (default: none)")
	f.StringSliceVar(&t.sendTo, "send-to", nil, "API servers that this machine's credentials (--allow-exec, --file-root) may be sent to, or * for any")
}

// options are the ResolverOptions the flags describe; the caller adds Secrets.
func (t *trustFlags) options() (multicluster.ResolverOptions, error) {
	var o multicluster.ResolverOptions
	known := []string{v1alpha1.ProviderTypeSecret, v1alpha1.ProviderTypeKubeconfigSecret, v1alpha1.ProviderTypeKubeconfigFile, v1alpha1.ProviderTypeExec, v1alpha1.ProviderTypeTokenFile}
	var errs []error
	for _, p := range t.prefer {
		if !slices.Contains(known, p) {
			errs = append(errs, fmt.Errorf("--prefer: unknown provider type %q (known: %s)", p, strings.Join(known, ", ")))
		}
	}
	o.Prefer = t.prefer
	var to multicluster.ServerMatcher
	switch {
	case slices.Equal(t.sendTo, []string{"*"}):
		to = multicluster.AnyServer()
	case len(t.sendTo) > 0:
		to = multicluster.Servers(t.sendTo...)
	}
	for _, command := range t.execs {
		o.ExecPlugins = append(o.ExecPlugins, multicluster.ExecPlugin{Command: command, ClusterArgs: true, SendTo: to})
	}
	for _, dir := range t.roots {
		o.FileRoots = append(o.FileRoots, multicluster.FileRoot{Dir: dir, SendTo: to})
	}
	return o, errors.Join(errs...)
}

// args are the flags again, for a command line.
func (t *trustFlags) args() []string {
	var args []string
	for _, f := range []struct {
		name   string
		values []string
	}{{"prefer", t.prefer}, {"allow-exec", t.execs}, {"file-root", t.roots}, {"send-to", t.sendTo}} {
		for _, v := range f.values {
			args = append(args, "--"+f.name+"="+v)
		}
	}
	return args
}
