package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// explain-placement decides a policy file against the registry's Clusters and explains every
// candidate; with --decision, an existing decision (here another scheduler's) is the previous
// one, so that a chosen member within its toleration is kept.
func TestExplainPlacement(t *testing.T) {
	lf := sharedFleet(t)
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(t.Context(), lf.Registry.Config))
	ns := fleettest.CopySet(t, lf)
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	ready := func(name string, status metav1.ConditionStatus, reason string) {
		c, err := clusters.Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: "set by the test",
			LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))})
		_, err = clusters.UpdateStatus(t.Context(), c, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	ready("member-1", metav1.ConditionTrue, v1alpha1.ReasonReachable)
	ready("member-2", metav1.ConditionFalse, v1alpha1.ReasonUnreachable)
	dir := t.TempDir()
	policy := filepath.Join(dir, "web.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("count: 1\ntolerations: [{reason: Unreachable, seconds: 300}]\n"), 0o600))

	explain := func(args ...string) (int, string, string) {
		var stdout, stderr syncBuffer
		code := run(t.Context(), append([]string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "explain-placement"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	s := &explainPlacement{lf: lf, ns: ns, dir: dir, policy: policy, explain: explain}
	s.decisions(t)
	s.badInput(t)
	s.scores(t)
}

// scores: a policy with prefer and fit shows each candidate's score, and why one without
// figures is out.
func (s *explainPlacement) scores(t *testing.T) {
	clusters := versioned.NewForConfigOrDie(s.lf.Registry.Config).ClusterregistryV1alpha1().Clusters(s.ns)
	c, err := clusters.Get(t.Context(), "member-1", metav1.GetOptions{})
	require.NoError(t, err)
	c.Status.Resources = &v1alpha1.ClusterResources{Nodes: 2, ReadyNodes: 2,
		Allocatable:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
		Requested:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		LargestFree:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		LastObservedTime: metav1.Now()}
	_, err = clusters.UpdateStatus(t.Context(), c, metav1.UpdateOptions{})
	require.NoError(t, err)
	file := filepath.Join(s.dir, "scored.yaml")
	require.NoError(t, os.WriteFile(file, []byte("count: 1\nfit: {total: {cpu: 2}}\nprefer: [{weight: 2, cel: 'cluster.resources.free[\"cpu\"]'}]\n"), 0o600))
	code, out, errOut := s.explain("-f", file)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^CLUSTER\s+CHOSEN\s+SCORE\s+REASON\s+WHY$`, out)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(s.ns)+`/member-1\s+yes\s+12\s+Chosen\s+fits the policy; score 12$`, out)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(s.ns)+`/member-2\s+no\s+-\s+NotReady\s+`, out)
}

// explainPlacement is what the parts of TestExplainPlacement share, in order.
type explainPlacement struct {
	lf      *localfleet.Fleet
	ns      string
	dir     string
	policy  string
	explain func(args ...string) (int, string, string)
}

// decisions: a policy file explained against the registry, alone and against the last decision.
func (s *explainPlacement) decisions(t *testing.T) {
	lf, ns, policy, explain := s.lf, s.ns, s.policy, s.explain
	code, out, errOut := explain("-f", policy)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^CLUSTER\s+CHOSEN\s+REASON\s+WHY$`, out)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(ns)+`/member-1\s+yes\s+Chosen\s+fits the policy$`, out)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(ns)+`/member-2\s+no\s+NotReady\s+Ready is False \(Unreachable\) for 1m\d*s?; a member is first chosen only once Ready$`, out)
	require.Contains(t, out, "1 of 2 candidates chosen")
	require.Contains(t, out, "a chosen member stays chosen while not Ready, counted from when it stopped being Ready: Unreachable 300s, NotReady 300s, Starting 300s, AgentDisconnected 300s\n",
		"the defaults of the reasons the policy does not name are said")

	// The last decision chose member-2: it is kept while Unreachable for less than 300 s, and
	// member-1 waits for room.
	pd := &cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{cpv1alpha1.DecisionKeyLabel: "web"}},
		Decisions: []cpv1alpha1.ClusterDecision{{ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Name: "member-2"}}}}
	_, err := cpversioned.NewForConfigOrDie(lf.Registry.Config).ApisV1alpha1().PlacementDecisions(ns).Create(t.Context(), pd, metav1.CreateOptions{})
	require.NoError(t, err)
	code, out, errOut = explain("-f", policy, "--decision", "web")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(ns)+`/member-2\s+yes\s+Tolerated\s+chosen before; not Ready, tolerated until `, out)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(ns)+`/member-1\s+no\s+OverCount\s+`, out)
	require.Contains(t, out, "a toleration or a rebalance's cooldown ends at ")
}

// badInput: bad input names the file and the field; a Placement file is taken whole, another kind
// refused.
func (s *explainPlacement) badInput(t *testing.T) {
	ns, dir, policy, explain := s.ns, s.dir, s.policy, s.explain
	// Bad input: each names the file and the field.
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("count: 1\nspread: {maxSkew: 1}\ncel: 'cluster.(('\n"), 0o600))
	code, _, errOut := explain("-f", bad)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "-f "+bad+": placement policy: ")
	require.Contains(t, errOut, "spread.label: required")
	require.Contains(t, errOut, "cel: ")
	unknown := filepath.Join(dir, "unknown.yaml")
	require.NoError(t, os.WriteFile(unknown, []byte("cuont: 1\n"), 0o600))
	code, _, errOut = explain("-f", unknown)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `unknown field "cuont"`)
	// The Placement file the README shows is taken whole (its spec is the policy), and the
	// command says which of the two it read; another kind is refused, naming what it wants.
	whole := filepath.Join(dir, "placement.yaml")
	require.NoError(t, os.WriteFile(whole, []byte(`apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Placement
metadata: {name: web, namespace: fleet}
spec:
  count: 1
  tolerations: [{reason: Unreachable, seconds: 300}]
`), 0o600))
	code, out, errOut := explain("-f", whole)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, `Explaining the spec of Placement "web" of `+whole)
	require.Contains(t, out, "1 of 2 candidates chosen")
	_, _, errOut = explain("-f", policy)
	require.Contains(t, errOut, "Explaining the policy (a Placement's spec) of "+policy)
	require.NoError(t, os.WriteFile(unknown, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"), 0o600))
	code, _, errOut = explain("-f", unknown)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `apiVersion "v1", kind "ConfigMap": want a Placement (apiVersion clusterregistry.k8s.io/v1alpha1), or a Placement's spec alone`)
	require.NoError(t, os.WriteFile(unknown, []byte("apiVersion: clusterregistry.k8s.io/v1alpha1\nkind: Placement\nspec: {cuont: 1}\n"), 0o600))
	code, _, errOut = explain("-f", unknown)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `unknown field "cuont"`)

	code, _, errOut = explain()
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "name a Placement, or give a policy file with -f/--filename")
	code, _, errOut = explain("nothere")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "reading Placement "+ns+"/nothere")
	code, _, errOut = explain("-f", policy, "--decision", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no PlacementDecision has this decision key")
}
