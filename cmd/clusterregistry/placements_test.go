package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// controllers --controllers health,placements probes the real members and decides a Placement
// over them: the decision is written as PlacementDecisions, the Placement's status says why,
// get placements shows it and explain-placement NAME explains it against its own decision.
func TestPlacementsCommand(t *testing.T) {
	lf := sharedFleet(t)
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(t.Context(), lf.Registry.Config))
	ns := fleettest.CopySet(t, lf)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	_, err := registry.Placements(ns).Create(t.Context(), &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1alpha1.PlacementSpec{Count: ptr.To[int32](1), Tolerations: []v1alpha1.PlacementToleration{{Reason: v1alpha1.ReasonUnreachable, Seconds: ptr.To[int64](300)}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "controllers", "--controllers", "health,placements",
			"--interval", "300ms", "--failure-threshold", "1", "--success-threshold", "1"}, &logs, &logs)
	}()
	var p *v1alpha1.Placement
	require.Eventually(t, func() bool {
		p, err = registry.Placements(ns).Get(t.Context(), "web", metav1.GetOptions{})
		// Both members probed Ready: one chosen, the other over the count.
		return err == nil && p.Status.Chosen == 1 && meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.PlacementSatisfied) &&
			slices.Equal(p.Status.Candidates, []v1alpha1.PlacementReasonCount{{Reason: "Chosen", Count: 1}, {Reason: "OverCount", Count: 1}})
	}, 60*time.Second, 100*time.Millisecond, "never decided; status %+v; logs:\n%s", p, logs.String())
	d, err := decision.Read(t.Context(), cpversioned.NewForConfigOrDie(lf.Registry.Config), ns, "web")
	require.NoError(t, err)
	require.Len(t, d.Clusters, 1)
	chosen := d.Clusters[0].Name

	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr syncBuffer
		code := run(t.Context(), append([]string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := cmd("get", "placements")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^NAME\s+COUNT\s+CHOSEN\s+SATISFIED\s+REASON\s+AGE$`, out)
	require.Regexp(t, `(?m)^web\s+1\s+1\s+True\s+Satisfied\s+\S+$`, out)
	code, out, errOut = cmd("get", "placements", "-o", "wide")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^web\s+1\s+1\s+True\s+Satisfied\s+\S+\s+Chosen=1,OverCount=1\s+1 of 1 chosen$`, out)
	code, out, errOut = cmd("get", "placements", "web", "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "kind: Placement")
	require.Contains(t, out, "decisionKey: web")
	code, out, errOut = cmd("get", "placements", "-o", "name")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "placement.clusterregistry.k8s.io/web\n", out)
	code, out, errOut = cmd("get", "placements", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"kind": "List"`)
	require.Contains(t, out, `"kind": "Placement"`)
	code, _, errOut = cmd("get", "placements", "nothere")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no Placement nothere in namespace "+ns)

	requireGetFormats(t, ns, registry, cmd)
	requireWatchOfAPlacement(t, lf, ns, registry)

	// explain-placement NAME: against its own decision, the chosen member is Kept.
	code, out, errOut = cmd("explain-placement", "web")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(ns+"/"+chosen)+`\s+yes\s+Kept\s+`, out)
	require.Regexp(t, `(?m)\s+no\s+OverCount\s+`, out)
	require.Contains(t, out, "1 of 2 candidates chosen")

	cancel()
	requireStopped(t, done, &logs)
}

// requireGetFormats: what get has, get placements has: labels as columns, --sort-by, custom
// columns, names.
func requireGetFormats(t *testing.T, ns string, registry crv1alpha1.ClusterregistryV1alpha1Interface, cmd func(args ...string) (int, string, string)) {
	t.Helper()
	_, err := registry.Placements(ns).Create(t.Context(), &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "api", Labels: map[string]string{"tier": "gold"}},
		Spec: v1alpha1.PlacementSpec{Count: ptr.To[int32](2)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	code, out, errOut := cmd("get", "placements", "--show-labels", "-L", "tier")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^NAME\s+COUNT\s+CHOSEN\s+SATISFIED\s+REASON\s+AGE\s+TIER\s+LABELS$`, out)
	require.Regexp(t, `(?m)^api\s+2\s+\d\s+\S+\s+\S+\s+\S+\s+gold\s+tier=gold$`, out)
	code, out, errOut = cmd("get", "placements", "--sort-by", "{.spec.count}", "-o", "custom-columns=NAME:.metadata.name,COUNT:.spec.count", "--no-headers")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^web\s+1\napi\s+2\n$`, out)
	code, out, errOut = cmd("get", "placements", "--sort-by", "{.spec.count}", "-o", "name", "-l", "tier=gold")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "placement.clusterregistry.k8s.io/api\n", out)
}

// requireWatchOfAPlacement: get placements -w api lists Placement api once, then its change,
// each row under the header, and repeats nothing.
func requireWatchOfAPlacement(t *testing.T, lf *localfleet.Fleet, ns string, registry crv1alpha1.ClusterregistryV1alpha1Interface) {
	t.Helper()
	// The scheduler decides api (both members) before the watch starts, so that the row the
	// watch lists first is the last until the patch: a decision landing between the list and the
	// watch would be a second row, and this test asserts that the watch repeats nothing.
	require.Eventually(t, func() bool {
		p, err := registry.Placements(ns).Get(t.Context(), "api", metav1.GetOptions{})
		return err == nil && p.Status.Chosen == 2 && p.Status.ObservedGeneration == p.Generation &&
			meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.PlacementSatisfied)
	}, 60*time.Second, 100*time.Millisecond, "api never decided")
	watchCtx, stopWatch := context.WithCancel(t.Context())
	var watched syncBuffer
	watchDone := make(chan int, 1)
	go func() {
		watchDone <- run(watchCtx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "get", "placements", "-w", "api"}, &watched, &watched)
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, strings.Count(watched.String(), "api "), "get -w printed:\n%s", watched.String())
	}, 30*time.Second, 20*time.Millisecond)
	_, err := registry.Placements(ns).Patch(t.Context(), "api", types.MergePatchType, []byte(`{"spec":{"count":3}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Regexp(c, `(?m)^api\s+3\s`, watched.String())
	}, 30*time.Second, 20*time.Millisecond)
	stopWatch()
	require.Equal(t, 0, <-watchDone, watched.String())
	header := strings.SplitN(watched.String(), "\n", 2)[0]
	for _, line := range strings.Split(strings.TrimSpace(watched.String()), "\n")[1:] {
		require.Equal(t, strings.Index(header, "REASON"), strings.Index(line, strings.Fields(line)[4]), "a -w row not under the header:\n%s", watched.String())
	}
}
