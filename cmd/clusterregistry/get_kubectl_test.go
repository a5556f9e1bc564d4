package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// lines are out's lines, without the last newline.
func lines(out string) []string { return strings.Split(strings.TrimSuffix(out, "\n"), "\n") }

// get does what kubectl users reach for: --no-headers, --show-labels, -L, --sort-by,
// -o custom-columns, -w, and completion of -o's values.
func TestGetWithKubectlHabits(t *testing.T) {
	lf := sharedFleet(t)
	ctx := t.Context()
	ns := fleettest.CopySet(t, lf)
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	for name, labels := range map[string]string{
		"member-1": `{"region":"eu","env":"prod","order":"2"}`,
		"member-2": `{"region":"us","order":"10"}`,
	} {
		_, err := clusters.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	cli := commandLine(ctx, lf.Registry.Kubeconfig, ns)
	get := func(args ...string) string {
		t.Helper()
		code, out, errOut := cli(append([]string{"get"}, args...)...)
		require.Equal(t, 0, code, "get %v: %s", args, errOut)
		return out
	}

	out := lines(get("--no-headers", "-L", "region"))
	require.Len(t, out, 2, "--no-headers printed a header")
	require.Regexp(t, `^member-1\s+Unknown\s+.*\seu$`, out[0])
	require.Regexp(t, `^member-2\s+Unknown\s+.*\sus$`, out[1])

	out = lines(get("--show-labels"))
	require.Regexp(t, `^NAME\s+READY\s+REASON\s+VERSION\s+LAST REPORT\s+CREDENTIAL\s+EXPIRES\s+LABELS$`, out[0])
	require.Regexp(t, `^member-1\s.*\senv=prod,fleet=local,order=2,region=eu$`, out[1])

	// Sorted by a label's value: numbers as numbers (2 before 10), as kubectl sorts them.
	out = lines(get("--sort-by", ".metadata.labels.order", "--no-headers", "-o", "custom-columns=NAME:.metadata.name"))
	require.Equal(t, []string{"member-1", "member-2"}, out)
	out = lines(get("--sort-by", "{.metadata.labels.region}", "-o", "custom-columns=NAME:.metadata.name,REGION:.metadata.labels.region,NOPE:.status.nope"))
	require.Regexp(t, `^NAME\s+REGION\s+NOPE$`, out[0])
	require.Regexp(t, `^member-1\s+eu\s+<none>$`, out[1])
	require.Regexp(t, `^member-2\s+us\s+<none>$`, out[2])

	// kubectl's own printers: a columns file, and a Quantity sorted by value.
	file := filepath.Join(t.TempDir(), "columns")
	require.NoError(t, os.WriteFile(file, []byte("NAME          ORDER\n.metadata.name .metadata.labels.order\n"), 0o600))
	out = lines(get("--sort-by", ".metadata.labels.order", "-o", "custom-columns-file="+file))
	require.Equal(t, []string{"member-1", "member-2"}, []string{strings.Fields(out[1])[0], strings.Fields(out[2])[0]}, out)
	require.Regexp(t, `^NAME\s+ORDER$`, out[0])

	out = lines(get("-A", "-l", "region=eu", "-o", "wide"))
	require.Regexp(t, `^NAMESPACE\s+NAME\s+READY\s+.*\s+SERVER\s+MESSAGE$`, out[0])
	require.Regexp(t, `^`+ns+`\s+member-1\s+Unknown\s.*https://127\.0\.0\.1:\d+`, out[1])

	for _, bad := range [][]string{
		{"-w", "member-1", "member-2"},
		{"-o", "custom-columns="},
		{"-o", "custom-columns=NAME"},
		{"--sort-by", "{.metadata.name"},
		{"-o", "yaml", "--show-labels"},
		{"-o", "custom-columns-file=" + filepath.Join(t.TempDir(), "absent")},
	} {
		code, _, errOut := cli(append([]string{"get"}, bad...)...)
		require.Equal(t, 2, code, "get %v: %s", bad, errOut)
	}

	// -w: the selection, then a row per change, until interrupted (exit 0).
	watchCtx, stop := context.WithCancel(ctx)
	var watched syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(watchCtx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "get", "-w", "-l", "env=prod"}, &watched, &watched)
	}()
	require.Eventually(t, func() bool { return strings.Contains(watched.String(), "member-1") }, 30*time.Second, 20*time.Millisecond)
	_, err := clusters.Patch(ctx, "member-1", types.MergePatchType, []byte(`{"spec":{"displayName":"changed"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Count(watched.String(), "member-1") == 2 }, 30*time.Second, 20*time.Millisecond,
		"no row for the change:\n%s", watched.String())
	stop()
	require.Equal(t, 0, <-done, watched.String())
	require.Equal(t, 1, strings.Count(watched.String(), "NAME"), "the header is printed once:\n%s", watched.String())
	require.NotContains(t, watched.String(), "member-2", "-w printed a Cluster outside the selection")

	requireOutputCompletion(t)
}

// requireOutputCompletion: completion offers -o's values, kubectl's names.
func requireOutputCompletion(t *testing.T) {
	t.Helper()
	var comp, compErr bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"__complete", "get", "-o", ""}, &comp, &compErr), compErr.String())
	for _, v := range []string{"wide", "custom-columns", "custom-columns-file", "yaml", "json", "jsonpath"} {
		require.Contains(t, lines(comp.String()), v)
	}
}
