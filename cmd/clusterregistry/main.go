package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

func main() {
	initLogging()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runAs(ctx, filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks errors in how the command was called: exit status 2.
type usageError struct{ error }

// exitStatus is an error with the exit status it calls for (diff's 1 when something would
// change); err nil prints nothing.
type exitStatus struct {
	code int
	err  error
}

func (e exitStatus) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e exitStatus) Unwrap() error { return e.err }

func (e usageError) Unwrap() error { return e.error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runAs(ctx, "clusterregistry", args, stdout, stderr)
}

// runAs runs the command as invoked under name: clusterregistry, or kubectl's names for its
// plugin and the plugin's completion.
func runAs(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	safeOut, safeErr := &terminalSafe{w: stdout}, &terminalSafe{w: stderr}
	defer func() { _, _ = safeOut.Flush(), safeErr.Flush() }()
	stdout, stderr = safeOut, safeErr
	cmd := newRoot(ctx)
	args = asInvoked(cmd, name, args)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	strictCompletion(cmd)
	err := cmd.Execute()
	var usage usageError
	var status exitStatus
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return 0
	case errors.As(err, &status):
		if status.err != nil {
			fmt.Fprintln(stderr, "clusterregistry:", status.err)
		}
		return status.code
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "clusterregistry:", err)
		fmt.Fprintln(stderr, "Run clusterregistry --help for the commands and flags.")
		return 2
	}
	fmt.Fprintln(stderr, "clusterregistry:", err)
	return 1
}

func newRoot(ctx context.Context) *cobra.Command {
	registry := genericclioptions.NewConfigFlags(true)
	f := &factory{flags: registry}
	root := &cobra.Command{
		Use:   "clusterregistry",
		Short: "Run the Cluster Registry SDK's components against a registry",
		Long: `clusterregistry acts on a cluster registry: a Kubernetes API server that serves the
clusterregistry.k8s.io Cluster API, one namespace per cluster set.

It reaches the registry with kubectl's connection flags.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Left to cobra, an unknown command exits with status 1; it is a usage error (2).
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q", args[0])}
			}
			return cmd.Help()
		},
	}
	root.SetContext(ctx)
	registry.AddFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newInstall(f), newJoin(f), newUnjoin(f), newExport(f), newImport(f), newCredential(f), newHealth(f), newControllers(f), newRotate(f), newGet(f), newDescribe(f), newExplainPlacement(f), newRollout(f), newDiff(f), newTunnelServer(f), newTunnelProxy(f), newVersion())
	registerCompletions(root, f)
	return root
}

// strictCompletion makes cobra's completion command refuse a shell it does not know (completion
// fish2) as a usage error; cobra's prints its help and exits 0. It is called once root's output is
// set: the completion command writes its scripts where root wrote when it was made.
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	if completion, _, err := root.Find([]string{"completion"}); err == nil && completion != root {
		completion.Args = cobra.ArbitraryArgs
		completion.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("completion %q: want one of bash, zsh, fish, powershell", args[0])}
			}
			return cmd.Help()
		}
	}
}

// usageArgs makes the errors of a positional-argument check usage errors (exit status 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// options is what each subcommand's Options struct does, as kubectl's commands do: Complete fills
// in what the flags and arguments leave to the environment, Validate checks without reaching any
// server, Run does the work.
type options interface {
	Complete(f *factory, cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// runOptions is a subcommand's RunE: o's Complete, Validate and Run, in order.
func runOptions(f *factory, o options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(f, cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
}
