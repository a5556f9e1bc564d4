package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cluster-registry/sdk/join"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// joinTunnelFlags are join's flags for a member reached through a tunnel.
type joinTunnelFlags struct {
	server, ca, agent, destination, image, manifests string
}

func (f *joinTunnelFlags) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.server, "tunnel", "", "join a member the registry cannot dial: the tunnel server's agent address (HOST:PORT) as the member reaches it")
	fl.StringVar(&f.ca, "tunnel-agent-ca", "", "with --tunnel: a PEM file of the CA that signs the tunnel server's agent certificate")
	fl.StringVar(&f.agent, "tunnel-agent", "", "with --tunnel: the agent's ServiceAccount in the cluster set (default: NAME-agent)")
	fl.StringVar(&f.destination, "tunnel-destination", "", "with --tunnel: where on the member the agent dials its API server, HOST:PORT (default "+agent.DefaultDestination+")")
	fl.StringVar(&f.image, "tunnel-agent-image", "", "with --tunnel: the agent's container image (default konnectivity's proxy-agent "+agent.Version+")")
	fl.StringVar(&f.manifests, "tunnel-manifests", "", `with --tunnel: write the agent's manifests to this file ("-" for stdout) instead of applying them on the member; they hold its token`)
}

// complete makes join.Options.Tunnel of the flags, reading the CA.
func (f *joinTunnelFlags) complete(cmd *cobra.Command, o *join.Options) error {
	if f.server == "" {
		return nil
	}
	if f.ca == "" {
		return usageError{fmt.Errorf("--tunnel needs --tunnel-agent-ca: the CA that verifies the tunnel server's agent address")}
	}
	ca, err := os.ReadFile(f.ca)
	if err != nil {
		return fmt.Errorf("--tunnel-agent-ca: %w", err)
	}
	o.Tunnel = &join.TunnelOptions{Server: f.server, ServerCA: ca, Agent: f.agent, Destination: f.destination, Image: f.image}
	return nil
}

// validate refuses tunnel flags without --tunnel, and --tunnel with --exec.
func (f *joinTunnelFlags) validate(cmd *cobra.Command, exec bool) error {
	if f.server == "" {
		for _, name := range []string{"tunnel-agent-ca", "tunnel-agent", "tunnel-destination", "tunnel-agent-image", "tunnel-manifests"} {
			if cmd.Flags().Changed(name) {
				return usageError{fmt.Errorf("--%s goes with --tunnel", name)}
			}
		}
		return nil
	}
	if exec {
		return usageError{fmt.Errorf("--tunnel and --exec conflict: a tunnelled member is reached with its account's token, never with readers' own credentials")}
	}
	return nil
}

// open points the join's Manifests at --tunnel-manifests' file (not for a dry run, which shows
// them without a token), and returns what closes it.
func (f *joinTunnelFlags) open(cmd *cobra.Command, t *join.TunnelOptions, dryRun bool) (func() error, error) {
	none := func() error { return nil }
	if t == nil || f.manifests == "" {
		return none, nil
	}
	t.Manifests = io.Discard
	if dryRun {
		return none, nil
	}
	if f.manifests == "-" {
		t.Manifests = cmd.OutOrStdout()
		return none, nil
	}
	file, err := os.OpenFile(f.manifests, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--tunnel-manifests: %w", err)
	}
	t.Manifests = file
	return file.Close, nil
}
