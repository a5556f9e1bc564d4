package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/execcredential"
	"github.com/cluster-registry/sdk/trustflags"
)

// errNotPlugin says the command was not run by kubectl as an exec plugin.
var errNotPlugin = errors.New(execcredential.InfoEnv + " is not set: credential is run by kubectl, as the exec plugin of a kubeconfig that `clusterregistry export --format kubeconfig` writes")

// CredentialOptions are credential's flags and what Complete makes of them: Complete fills in
// (the trust flags, and the ExecCredential kubectl passes in $KUBERNETES_EXEC_INFO), Run answers.
type CredentialOptions struct {
	Trust trustflags.Flags

	name    string
	info    []byte
	factory *factory
	out     io.Writer
}

// Complete reads the trust flags and kubectl's request.
func (o *CredentialOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.name, o.factory, o.out = args[0], f, cmd.OutOrStdout()
	var err error
	if _, err = o.Trust.ResolverOptions(); err != nil {
		return usageError{err}
	}
	o.info = []byte(os.Getenv(execcredential.InfoEnv))
	return nil
}

// Validate refuses to run other than as kubectl's plugin.
func (o *CredentialOptions) Validate() error {
	if len(o.info) == 0 {
		return errNotPlugin
	}
	return nil
}

// Run answers kubectl with the Cluster's credentials.
func (o *CredentialOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	return credential(ctx, o.out, reg, o.name, o.info, &o.Trust)
}

var (
	credentialLong = `credential is a client.authentication.k8s.io exec plugin: kubectl runs it, as the user entry of
a kubeconfig that "clusterregistry export --format kubeconfig" writes, to get credentials for
the Cluster NAME of the registry (its --kubeconfig, --context and -n).

It reads the Cluster with your registry credentials, resolves it as the SDK's tools do (Secrets
pinned to their servers; exec plugins and files only as --allow-exec, --allow-exec-args,
--file-root and --send-to allow), and answers with a token or a client certificate, valid for at most five minutes.

It refuses unless kubectl is about to call the very server the credentials were resolved for,
verified by the same CA: a kubeconfig edited, handed to you, or older than a change of the
Cluster's endpoint cannot send a member's credentials anywhere else. The kubeconfig's exec entry
must therefore set provideClusterInfo: true.`

	credentialExample = `  # Written by export into the kubeconfig, one user per Cluster:
  #   users:
  #   - name: fleet/prod-eu-1
  #     user:
  #       exec:
  #         apiVersion: client.authentication.k8s.io/v1
  #         command: clusterregistry
  #         args: [credential, prod-eu-1, --namespace=fleet, --context=registry]
  #         provideClusterInfo: true
  #         interactiveMode: Never
  clusterregistry export --format kubeconfig -n fleet > fleet.kubeconfig
  kubectl --kubeconfig fleet.kubeconfig --context prod-eu-1 get nodes

  # By hand, as kubectl runs it
  KUBERNETES_EXEC_INFO='{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
    "spec":{"cluster":{"server":"https://prod-eu-1.example.com:6443","certificate-authority-data":"..."}}}' \
    clusterregistry credential prod-eu-1 -n fleet --context registry`
)

func newCredential(f *factory) *cobra.Command {
	o := &CredentialOptions{}
	cmd := &cobra.Command{
		Use:     "credential NAME",
		Short:   "Be kubectl's credential plugin for a Cluster of the registry",
		Long:    credentialLong,
		Example: credentialExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return usageError{fmt.Errorf("%w: the name of the Cluster", err)}
			}
			return nil
		},
		RunE: runOptions(f, o),
	}
	o.Trust.AddFlags(cmd.Flags())
	return cmd
}

// credential answers kubectl's request for the credentials of Cluster namespace/name, with
// package execcredential: the errors here say what to do in the command's terms.
func credential(ctx context.Context, out io.Writer, reg *registry, name string, info []byte, trust *trustflags.Flags) error {
	namespace := reg.Namespace
	key := namespace + "/" + name
	req, err := execcredential.ParseRequest(info)
	if errors.Is(err, execcredential.ErrNoClusterInfo) {
		return fmt.Errorf("cluster %s: kubectl did not say which server it will call; set provideClusterInfo: true in the kubeconfig's exec entry (export writes it so)", key)
	}
	if err != nil {
		return err
	}

	at := strings.TrimSuffix(reg.Config.Host, "/")
	c, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("cluster %s is not in the registry (%s): it was removed or renamed; export the kubeconfig again", key, at)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("cluster %s: the registry (%s) does not let you read it; ask for the clusterregistry-view role (or view) in namespace %s: %w", key, at, namespace, err)
	case err != nil:
		return fmt.Errorf("cluster %s: reading it from the registry (%s): %w", key, at, err)
	}

	resolver, err := trust.ToResolver(reg.Kube, "clusterregistry-credential")
	if err != nil {
		return usageError{err}
	}
	resolved, err := resolver.Resolve(ctx, c)
	if err != nil {
		// A *access.ClusterError: it names the Cluster and each provider's reason, here in
		// the terms of the flags that would allow it.
		return trustflags.InFlagTerms(err)
	}
	answer, err := execcredential.Answer(ctx, req, resolved)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", key, err)
	}
	return json.NewEncoder(out).Encode(answer)
}
