package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

func newExport(registry *genericclioptions.ConfigFlags) *cobra.Command {
	var format, output, selector string
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:   "export [-n NAMESPACE | -A] [-l SELECTOR] [-o yaml|json]",
		Short: "Write the selected Clusters as a flat file, for storage and later use",
		Long: `export writes the Clusters it selects as one ClusterList: what import and multicluster.LoadFleet
read. It keeps what people write (names, namespaces, labels, annotations, spec) and drops what
the server and controllers fill in (uid, resourceVersion, managed fields, status), so that an
export imported again changes nothing. Clusters hold pointers, not credentials, so the file holds
none either.`,
		Example: `  # Keep the fleet cluster set in git
  clusterregistry export -n fleet > fleet.yaml

  # Production members of every cluster set, as JSON
  clusterregistry export -A -l env=prod -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "clusters" {
				return usageError{fmt.Errorf("--format %q: only \"clusters\" is supported so far", format)}
			}
			if output != "yaml" && output != "json" {
				return usageError{fmt.Errorf("-o %q: want yaml or json", output)}
			}
			cfg, namespace, err := connect(registry)
			if err != nil {
				return err
			}
			if allNamespaces {
				namespace = metav1.NamespaceAll
			}
			client, err := versioned.NewForConfig(cfg)
			if err != nil {
				return err
			}
			list, err := client.ClusterregistryV1alpha1().Clusters(namespace).List(cmd.Context(), metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return fmt.Errorf("listing the Clusters of namespace %q: %w", namespace, err)
			}
			return writeClusters(cmd.OutOrStdout(), list.Items, output)
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "clusters", `what to write: "clusters", a ClusterList`)
	f.StringVarP(&output, "output", "o", "yaml", "yaml or json")
	f.StringVarP(&selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod")
	f.BoolVarP(&allNamespaces, "all-namespaces", "A", false, "export the Clusters of every namespace (cluster set)")
	return cmd
}

// portable is c as people wrote it: no server-filled metadata, no status.
func portable(c v1alpha1.Cluster) v1alpha1.Cluster {
	return v1alpha1.Cluster{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels,
			Annotations: c.Annotations},
		Spec: c.Spec,
	}
}

func writeClusters(w io.Writer, clusters []v1alpha1.Cluster, output string) error {
	list := v1alpha1.ClusterList{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ClusterList"}}
	for _, c := range clusters {
		list.Items = append(list.Items, portable(c))
	}
	var data []byte
	var err error
	if output == "json" {
		data, err = json.MarshalIndent(list, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(list)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
