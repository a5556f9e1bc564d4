package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// writeObject writes v as -o asks: "json" (indented, as kubectl writes it) or "yaml".
func writeObject(w io.Writer, v any, output string) error {
	var data []byte
	var err error
	if output == "json" {
		data, err = json.MarshalIndent(v, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// appliedOutput is -o for the commands that apply Clusters (join, import): as with kubectl apply
// -o, the applied objects go to standard output, as the registry returned them, and the report
// lines go to standard error instead.
type appliedOutput struct{ format string }

func (o *appliedOutput) addFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output", "o", "", "print the applied Clusters: yaml, json or name (the report then goes to stderr)")
}

func (o *appliedOutput) validate() error {
	switch o.format {
	case "", "yaml", "json", "name":
		return nil
	}
	return usageError{fmt.Errorf("--output=%s: want yaml, json or name", o.format)}
}

// report is where the report lines go: stderr when the objects are printed.
func (o *appliedOutput) report(cmd *cobra.Command) io.Writer {
	if o.format != "" {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

// print writes the applied Clusters to w: one as itself, several as a List, each without its
// managed fields (as kubectl shows them by default).
func (o *appliedOutput) print(w io.Writer, applied []*v1alpha1.Cluster) error {
	if o.format == "" {
		return nil
	}
	items := make([]any, 0, len(applied))
	for _, c := range applied {
		c = c.DeepCopy()
		c.ManagedFields = nil
		c.APIVersion, c.Kind = v1alpha1.SchemeGroupVersion.String(), "Cluster"
		if o.format == "name" {
			if _, err := fmt.Fprintf(w, "cluster.%s/%s\n", v1alpha1.SchemeGroupVersion.Group, c.Name); err != nil {
				return err
			}
			continue
		}
		items = append(items, c)
	}
	switch {
	case o.format == "name":
		return nil
	case len(items) == 1:
		return writeObject(w, items[0], o.format)
	}
	return writeObject(w, map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, o.format)
}
