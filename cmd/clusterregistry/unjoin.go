package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clientset/versioned"
)

func newUnjoin(registry *genericclioptions.ConfigFlags) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "unjoin CONTEXT [--name NAME]",
		Short: "Remove what join made, in the registry and on the member",
		Long: `unjoin removes what join made for the cluster of one of your kubeconfig's contexts: in the
registry (the -n namespace), the Cluster and its token Secret; on the member, the service account
kube-system/clusterregistry-<name> and its ClusterRoleBinding, which revokes the token. What is
already gone is skipped. It says what it removed, in order.`,
		Example: `  # Undo: clusterregistry join kind-dev --name dev -n fleet
  clusterregistry unjoin kind-dev --name dev -n fleet`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return usageError{fmt.Errorf("%w: the kubeconfig context of the cluster to unjoin", err)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			member, _, err := memberConfig(registry, args[0])
			if err != nil {
				return err
			}
			if name == "" {
				name = args[0]
			}
			cfg, namespace, err := connect(registry)
			if err != nil {
				return err
			}
			return unjoin(cmd.Context(), cmd.OutOrStdout(), cfg, namespace, member, name)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the Cluster's name in the registry (default: the context's name)")
	return cmd
}

func unjoin(ctx context.Context, out io.Writer, registryConfig *rest.Config, namespace string, member *rest.Config, name string) error {
	registryKube, err := kubernetes.NewForConfig(registryConfig)
	if err != nil {
		return err
	}
	memberKube, err := kubernetes.NewForConfig(member)
	if err != nil {
		return err
	}
	clusters := versioned.NewForConfigOrDie(registryConfig).ClusterregistryV1alpha1().Clusters(namespace)
	account := "clusterregistry-" + name
	for _, step := range []struct {
		what   string
		delete func() error
	}{
		{fmt.Sprintf("registry: Cluster %s/%s", namespace, name), func() error { return clusters.Delete(ctx, name, metav1.DeleteOptions{}) }},
		{fmt.Sprintf("registry: Secret %s/%s-token", namespace, name), func() error {
			return registryKube.CoreV1().Secrets(namespace).Delete(ctx, name+"-token", metav1.DeleteOptions{})
		}},
		{"member: ClusterRoleBinding " + account, func() error {
			return memberKube.RbacV1().ClusterRoleBindings().Delete(ctx, account, metav1.DeleteOptions{})
		}},
		{fmt.Sprintf("member: ServiceAccount %s/%s", joinNamespace, account), func() error {
			return memberKube.CoreV1().ServiceAccounts(joinNamespace).Delete(ctx, account, metav1.DeleteOptions{})
		}},
	} {
		switch err := step.delete(); {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(out, "%s: already gone\n", step.what)
		case err != nil:
			return fmt.Errorf("%s: %w (the lines above say what was removed)", step.what, err)
		default:
			fmt.Fprintf(out, "%s deleted\n", step.what)
		}
	}
	return nil
}
