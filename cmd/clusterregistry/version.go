package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cluster-registry/sdk/buildinfo"
)

// VersionOptions are version's flags: Validate checks -o, Run prints.
type VersionOptions struct {
	Output string

	out io.Writer
}

// Complete takes where to print.
func (o *VersionOptions) Complete(_ *factory, cmd *cobra.Command, _ []string) error {
	o.out = cmd.OutOrStdout()
	return nil
}

// Validate refuses an -o it does not print.
func (o *VersionOptions) Validate() error {
	switch o.Output {
	case "", "json", "yaml":
		return nil
	}
	return usageError{fmt.Errorf("--output=%s: want json or yaml", o.Output)}
}

// Run prints the build's version, on one line or as an object.
func (o *VersionOptions) Run(context.Context) error {
	out, info := o.out, buildinfo.Read()
	if o.Output == "" {
		_, err := fmt.Fprintln(out, "clusterregistry", info)
		return err
	}
	return writeObject(out, info, o.Output)
}

var (
	versionLong = `version prints the SDK release the command was built from (a tag such as v0.2.0 when it was
installed with go install ...@version, "(devel)" for a build from a checkout), the commit and
whether the checkout had changes, and the Go version and platform.`

	versionExample = `  clusterregistry version
  clusterregistry version -o json`
)

func newVersion() *cobra.Command {
	o := &VersionOptions{}
	cmd := &cobra.Command{
		Use:     "version [-o json|yaml]",
		Short:   "Print the command's version: the SDK release and the commit it was built from",
		Long:    versionLong,
		Example: versionExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    runOptions(nil, o), // it reaches no server
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "json or yaml instead of one line")
	return cmd
}
