package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cluster-registry/sdk/internal/buildinfo"
)

func newVersion() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o json|yaml]",
		Short: "Print the command's version: the SDK release and the commit it was built from",
		Example: `  clusterregistry version
  clusterregistry version -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Read()
			switch output {
			case "":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "clusterregistry", info)
				return err
			case "json", "yaml":
				return writeObject(cmd.OutOrStdout(), info, output)
			}
			return usageError{fmt.Errorf("--output=%s: want json or yaml", output)}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml instead of one line")
	return cmd
}
