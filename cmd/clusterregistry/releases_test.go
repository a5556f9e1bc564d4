package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// controllers --controllers health,placements,releases delivers a Release to the members its
// Placement chose (health probes them Ready, placements decides): get releases and describe
// release show it, member by member.
func TestReleasesCommand(t *testing.T) {
	lf := sharedFleet(t)
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(t.Context(), lf.Registry.Config))
	ns := fleettest.CopySet(t, lf)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	_, err := registry.Placements(ns).Create(t.Context(), &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + ns + `"},"data":{"greeting":"hello"}}`
	_, err = registry.Releases(ns).Create(t.Context(), &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: []runtime.RawExtension{{Raw: []byte(cm)}}},
		Placement: v1alpha1.ReleasePlacement{Name: "web"}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "controllers", "--controllers", "health,placements,releases",
			"--interval", "300ms", "--failure-threshold", "1", "--success-threshold", "1"}, &logs, &logs)
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-done, "logs:\n%s", logs.String())
	}()
	var rel *v1alpha1.Release
	require.Eventually(t, func() bool {
		rel, err = registry.Releases(ns).Get(t.Context(), "web", metav1.GetOptions{})
		return err == nil && rel.Status.Ready == 2
	}, 60*time.Second, 100*time.Millisecond, "never delivered; status %+v; logs:\n%s", rel, logs.String())
	for _, m := range lf.Members {
		got, err := kubernetes.NewForConfigOrDie(m.Config).CoreV1().ConfigMaps("default").Get(t.Context(), ns, metav1.GetOptions{})
		require.NoError(t, err, m.Name)
		require.Equal(t, "hello", got.Data["greeting"])
	}

	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr syncBuffer
		code := run(t.Context(), append([]string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := cmd("get", "releases")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^NAME\s+PLACEMENT\s+REVISION\s+MEMBERS\s+READY\s+AVAILABLE\s+REASON\s+AGE$`, out)
	require.Regexp(t, `(?m)^web\s+web\s+`+rel.Status.Revision+`\s+2\s+2\s+True\s+Complete\s+\S+$`, out)
	code, out, errOut = cmd("get", "releases", "-o", "wide")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^web\s+web\s+\S+\s+2\s+2\s+True\s+Complete\s+\S+\s+1/1\s+Ready=2\s+2 of 2 members ready$`, out)
	code, out, errOut = cmd("get", "releases", "-o", "name")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "release.clusterregistry.k8s.io/web\n", out)

	code, out, errOut = cmd("describe", "release", "web")
	require.Equal(t, 0, code, errOut)
	t.Logf("describe release web:\n%s", out)
	require.Regexp(t, `(?m)^Placement:\s+web$`, out)
	require.Regexp(t, `(?m)^Source:\s+1 manifests, inline$`, out)
	require.Regexp(t, `(?m)^Members:\s+2, 2 ready \(Ready=2\)$`, out)
	require.Regexp(t, `(?m)^\s+Available\s+True\s+AllReady\s+`, out)
	require.Regexp(t, `(?m)^\s+member-1\s+Ready\s+`+rel.Status.Revision+`\s+-\s+\S+ ago\s+-$`, out)
	require.Regexp(t, `(?m)^\s+member-2\s+Ready\s+`+rel.Status.Revision+`\s+`, out)

	code, _, errOut = cmd("describe", "release", "nothere")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `releases.clusterregistry.k8s.io "nothere" not found`)
	code, _, errOut = cmd("describe", "release")
	require.Equal(t, 2, code, "a usage error: %s", errOut)
}
