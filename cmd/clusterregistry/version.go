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
		Long: `version prints the SDK release the command was built from (a tag such as v0.2.0 when it was
installed with go install ...@version, "(devel)" for a build from a checkout), the commit and
whether the checkout had changes, and the Go version and platform.`,
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
