// Command demo starts a local cluster registry (a real kube-apiserver and etcd with the Cluster
// CRD installed), applies the samples in examples/clusters, and shows them with kubectl. hack/demo.sh
// builds the binaries it needs and runs it; with -keep the registry stays up until Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cluster-registry/sdk/internal/testenv"
)

const namespace = "fleet"

func main() {
	keep := flag.Bool("keep", false, "keep the registry running until interrupted, and print how to reach it")
	samples := flag.String("samples", filepath.Join("examples", "clusters"), "directory of Cluster samples to apply")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *samples, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, samples string, keep bool) error {
	step("Starting a local registry: kube-apiserver and etcd, with the Cluster CRD installed")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	// Stop on every way out, an interrupt included, so no server or temporary file is left.
	defer func() {
		step("Stopping the registry and removing its files")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping:", err)
		}
	}()
	fmt.Println("registry at", env.Config.Host)

	kubectl := func(args ...string) error {
		fmt.Printf("\n$ kubectl %s\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, env.Kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	for _, args := range [][]string{
		{"create", "namespace", namespace},
		{"apply", "-n", namespace, "-f", samples},
		{"get", "clusters", "-n", namespace},
		{"get", "clusters", "-n", namespace, "-l", "env=prod"},
		{"explain", "cluster.spec.authInfo.providers"},
	} {
		if err := kubectl(args...); err != nil {
			return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
		}
	}

	if keep {
		step("The registry is up. In another shell:")
		fmt.Printf("  export KUBECONFIG=%s\n  %s get clusters -n %s\nPress Ctrl-C to stop.\n", env.Kubeconfig, env.Kubectl, namespace)
		<-ctx.Done()
	}
	return nil
}

func step(msg string) { fmt.Printf("\n== %s\n", msg) }
