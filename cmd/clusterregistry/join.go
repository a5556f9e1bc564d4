package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/join"
	"github.com/cluster-registry/sdk/trustflags"
)

// JoinOptions are join's flags and what Complete makes of them: Complete fills in, Validate
// checks without servers, Run does the work (package join's).
type JoinOptions struct {
	join.Options
	Labels string
	DryRun *dryRunFlag
	Output appliedOutput
	Tunnel joinTunnelFlags

	context string
	factory *factory
	cmd     *cobra.Command
}

// Complete takes the context, parses the labels and the dry-run strategy, and names the Cluster
// after the context unless --name does.
func (o *JoinOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.context, o.factory, o.cmd = args[0], f, cmd
	var err error
	if o.Options.Labels, err = labels.ConvertSelectorToLabelsMap(o.Labels); err != nil {
		return usageError{fmt.Errorf("--labels: %w", err)}
	}
	if o.Options.DryRun, err = o.DryRun.enabled(); err != nil {
		return err
	}
	if o.Name == "" {
		o.Name = o.context
	}
	return o.Tunnel.complete(cmd, &o.Options)
}

// Validate refuses flags that do not go together, before anything is reached.
func (o *JoinOptions) Validate() error {
	if err := o.Output.validate(); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		if o.cmd.Flags().Changed("name") {
			return usageError{fmt.Errorf("--name %q: %s", o.Name, strings.Join(errs, "; "))}
		}
		return usageError{fmt.Errorf("the context's name %q is not a Cluster name (%s): give one with --name", o.Name, strings.Join(errs, "; "))}
	}
	if o.Exec {
		for _, name := range []string{"cluster-role", "token-ttl", "allow-namespace-creation"} {
			if o.cmd.Flags().Changed(name) {
				return usageError{fmt.Errorf("--%s and --exec conflict: --exec makes no service account or token", name)}
			}
		}
		// package join takes the defaults as zero values with Exec
		o.ClusterRole, o.TokenTTL = "", 0
	} else if o.DropCredentialArgs {
		return usageError{fmt.Errorf("--%s goes with --exec: without it, join registers a token, not the context's plugin", dropCredentialArgsFlag)}
	}
	if err := o.Tunnel.validate(o.cmd, o.Exec); err != nil {
		return err
	}
	if !o.Exec && o.TokenTTL <= 0 {
		return usageError{fmt.Errorf("--token-ttl %s: want a positive duration", o.TokenTTL)}
	}
	if !o.Exec && o.TokenTTL < join.MinTokenTTL {
		return usageError{fmt.Errorf("--token-ttl %s: a member's API server gives no token for less than %s (nothing was done)", o.TokenTTL, join.MinTokenTTL)}
	}
	return nil
}

// Run joins the member, saying what it does as it goes.
func (o *JoinOptions) Run(ctx context.Context) error {
	member, server, err := o.factory.Member(o.context)
	if err != nil {
		return err
	}
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	opts := o.Options
	opts.Progress = o.Output.report(o.cmd)
	closeManifests, err := o.Tunnel.open(o.cmd, opts.Tunnel, opts.DryRun)
	if err != nil {
		return err
	}
	result, err := join.Join(ctx, member, reg.join(), opts)
	if err := errors.Join(err, closeManifests()); err != nil {
		return o.inFlagTerms(err)
	}
	report := opts.Progress
	if e := result.Exec; e != nil {
		allow, ok := trustflags.AllowExecArgsFor(e.Command, e.Args)
		if !ok {
			allow = "--" + trustflags.FlagAllowExecArgs + " with a pattern that fits its arguments"
		}
		fmt.Fprintf(report, "note: readers run the plugin only if they allow it with these arguments and this server: %s --%s=%s\n", allow, trustflags.FlagSendTo, server)
	}
	if !o.Options.DryRun {
		fmt.Fprintf(report, "next: clusterregistry health -n %s probes the members and fills READY and VERSION in kubectl get clusters -n %s\n", reg.Namespace, reg.Namespace)
		if !o.Exec {
			fmt.Fprintf(report, "next: clusterregistry health -n %s --rotate-credentials renews the token before it expires (or join again)\n", reg.Namespace)
		}
	}
	return o.Output.print(o.cmd.OutOrStdout(), []*v1alpha1.Cluster{result.Cluster})
}

// inFlagTerms says package join's errors in the terms of the command's flags and arguments.
func (o *JoinOptions) inFlagTerms(err error) error {
	var (
		noRole  *join.NoClusterRoleError
		taken   *join.NameTakenError
		credArg *join.CredentialArgError
	)
	switch {
	case errors.As(err, &noRole):
		return fmt.Errorf("%w, with --cluster-role", err)
	case errors.As(err, &taken):
		return fmt.Errorf("cluster %s/%s already exists for another server; choose another --name, or unjoin it first", taken.Namespace, taken.Name)
	case errors.Is(err, join.ErrNoExecPlugin):
		return fmt.Errorf("context %q: its user runs no exec plugin, so there is nothing for --exec to register; join it without --exec to copy a token", o.context)
	case errors.As(err, &credArg):
		return fmt.Errorf("context %q: %w (nothing was done)", o.context, credentialArgInFlagTerms(credArg))
	}
	return err
}

var (
	joinLong = `join registers the cluster of one of your kubeconfig's contexts (the member) in the registry
(the -n namespace, a cluster set). On the member, with the context's credentials, it makes a
namespace and in it a service account of their own, clusterregistry-<set>-<name>-<digest>, binds
the account to --cluster-role (default edit, bound cluster-wide: tools may change workloads
everywhere but not RBAC; choose view to only read, or cluster-admin) and to nothing else (with
--allow-namespace-creation, also to clusterregistry-namespace-creator: it may create namespaces,
as a Release's createNamespace needs, and do nothing else with them), lets it ask for tokens of
itself and make the Secrets of its namespace that they are bound to, and nothing else (so that a
rotator, such as clusterregistry health --rotate-credentials, renews the token with the token, and
revokes the one it replaces), and asks for a token for it, valid --token-ttl. In the registry it stores the token and the
member's CA in a Secret pinned to the member's server, and applies the Cluster: the endpoint,
caBundle, a secret provider, labels and display name.

With --exec it copies no token: for a context whose user runs an exec plugin (a cloud's, such as
aws eks get-token or gke-gcloud-auth-plugin), it checks that the plugin reaches the member and
registers the plugin's command and args as the Cluster's exec provider, so that each reader runs
it with their own cloud identity. Readers must allow the command with its arguments
(--allow-exec-args; join prints the flag) and the server (--send-to). The plugin's environment is
not copied, as it may hold secrets; nor is an argument that passes a credential (such as
--oidc-client-secret=...): join refuses such a plugin, or with --drop-credential-args registers it
without the argument. To switch a member between a token and --exec, unjoin it first.

Run again, it updates what it made rather than duplicating it, with a fresh token, and revokes
the tokens it replaces (and removes the account an earlier release made in kube-system). It refuses a
name already taken by a Cluster for another server. unjoin removes what join made, on both sides.
With --dry-run it checks the context, the name, the member's ClusterRole and the Cluster (by a
server-side dry run) and says what it would do, changing nothing. With -o it prints the Cluster
as the registry returned it (yaml, json or name), and the report goes to stderr.

With --tunnel it joins a member the registry cannot dial (behind NAT, say), from a machine that
reaches both: the member's account as above, and a tunnel agent (konnectivity's) that dials out
from the member to the tunnel server's agent address, --tunnel, verified with --tunnel-agent-ca.
In the registry it makes the agent's ServiceAccount (--tunnel-agent, default NAME-agent), which
says where on the member the agent dials (--tunnel-destination, default the API server's Service,
kubernetes.default.svc:443) and a token of it for the tunnel; on the member, in the account's
namespace, the agent's Secret and Deployment (or, with --tunnel-manifests, writes them to a file:
they hold the agent's token). The Cluster says it is reached through the agent, and its token is
pinned to it. A renewer (health --rotate-credentials) renews the agent's token too; unjoin removes
the agent's account, which revokes its tokens. See docs/tunnel.md.`

	joinExample = `  # Register the kind-dev context as "dev", labelled env=dev, in the fleet cluster set
  clusterregistry join kind-dev --name dev --labels env=dev -n fleet

  # Releases with createNamespace may make their namespace on this member
  clusterregistry join kind-dev --name dev --allow-namespace-creation -n fleet

  # Read-only access for the registry's tools
  clusterregistry join prod-eu-1 --cluster-role view -n fleet

  # A cloud cluster: each reader authenticates with the context's plugin, as themselves
  clusterregistry join gke_acme_europe-west1_prod --name prod-eu-2 --exec -n fleet

  # An edge cluster behind NAT, joined from inside its network: its agent dials out to the tunnel server
  clusterregistry join edge-3 --tunnel=tunnel.example.com:8091 --tunnel-agent-ca=agents-ca.crt -n fleet

  # The same, with the agent's manifests written out for a GitOps repository instead of applied
  clusterregistry join edge-3 --tunnel=tunnel.example.com:8091 --tunnel-agent-ca=agents-ca.crt --tunnel-manifests=edge-3-agent.yaml -n fleet`
)

func newJoin(fac *factory) *cobra.Command {
	o := &JoinOptions{}
	cmd := &cobra.Command{
		Use:     "join CONTEXT [--name NAME] [--labels k=v,...] [--cluster-role ROLE] [-o yaml|json|name|jsonpath=...]",
		Short:   "Register a cluster of your kubeconfig in the registry",
		Long:    joinLong,
		Example: joinExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return usageError{fmt.Errorf("%w: the kubeconfig context of the cluster to join", err)}
			}
			return nil
		},
		RunE: runOptions(fac, o),
	}
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", "", "the Cluster's name in the registry (default: the context's name)")
	f.StringVar(&o.DisplayName, "display-name", "", "the Cluster's display name")
	f.StringVar(&o.Labels, "labels", "", "labels for the Cluster, e.g. env=prod,region=eu")
	f.StringVar(&o.ClusterRole, "cluster-role", join.DefaultClusterRole, "the member's ClusterRole that the registry's tools act with")
	f.BoolVar(&o.AllowNamespaceCreation, "allow-namespace-creation", false, "also let the account create namespaces (and nothing else with them), for Releases with createNamespace; off, a join run again takes an earlier grant away")
	f.DurationVar(&o.TokenTTL, "token-ttl", join.DefaultTokenTTL, "how long the token is valid (the member may cap it); health --rotate-credentials renews it before it expires, or join again")
	f.BoolVar(&o.Exec, "exec", false, "register the context's exec plugin instead of a token (cloud clusters)")
	f.BoolVar(&o.DropCredentialArgs, dropCredentialArgsFlag, false, "with --exec: leave out the plugin's arguments that pass a credential (--client-secret=..., --password ...) instead of refusing to register it")
	o.DryRun = addDryRunFlag(cmd, "client", "checks what it can (the registry by a server dry run) and says what it would do, changing nothing", nil)
	o.Output.addFlag(cmd)
	o.Tunnel.addFlags(cmd)
	return cmd
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// join is the registry as package join takes it.
func (r *registry) join() join.Registry {
	return join.Registry{Namespace: r.Namespace, Clusters: r.Clusters, Kube: r.Kube, Server: r.Config.Host}
}
