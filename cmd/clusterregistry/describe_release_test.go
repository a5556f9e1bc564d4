package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clientset/versioned/fake"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A chart source is described as what it is, with the chart status says was delivered; a
// hostile URL is shown as text.
func TestDescribeReleaseOfAChart(t *testing.T) {
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "fleet"}, Spec: v1alpha1.ReleaseSpec{
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
		Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{Repository: &v1alpha1.ReleaseChartRepository{
			URL: "https://charts.example.com/\x1b[31mstable", Chart: "shop", Version: "~1.2", Digest: "sha256:" + string(bytes.Repeat([]byte("a"), 64))}}},
	}, Status: v1alpha1.ReleaseStatus{Chart: &v1alpha1.ReleaseChartStatus{Name: "shop", Version: "1.2.3", Digest: "sha256:abc"}}}
	var out bytes.Buffer
	require.NoError(t, describeRelease(&out, rel, nil, time.Now()))
	require.Contains(t, out.String(), "Source:            chart shop from https://charts.example.com/^[[31mstable, version ~1.2, digest pinned\n")
	require.Contains(t, out.String(), "Chart:             shop 1.2.3 (sha256:abc)\n")
	require.Contains(t, out.String(), "Chart Mode:        Render")

	rel.Spec.Source.Chart = &v1alpha1.ReleaseChartSource{ConfigMap: &v1alpha1.ReleaseChartConfigMap{Name: "shop-chart"}}
	rel.Status.Chart = nil
	out.Reset()
	require.NoError(t, describeRelease(&out, rel, nil, time.Now()))
	require.Contains(t, out.String(), "Source:            chart in ConfigMap shop-chart, key chart.tgz\n")
	require.NotContains(t, out.String(), "Chart:")
}

// A Release's dependencies are named, as text.
func TestDescribeReleaseNamesItsDependencies(t *testing.T) {
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet"}, Spec: v1alpha1.ReleaseSpec{
		Placement: v1alpha1.ReleasePlacement{Name: "web"}, DependsOn: []v1alpha1.ReleaseDependency{{Name: "db"}, {Name: "crds\x1b[31m"}}}}
	var out bytes.Buffer
	require.NoError(t, describeRelease(&out, rel, nil, time.Now()))
	require.Regexp(t, `(?m)^Depends on:\s+db, crds\^\[\[31m$`, out.String())
}

// What spec.feedback read on each member is shown, as text.
func TestDescribeReleaseShowsFeedback(t *testing.T) {
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet"}, Spec: v1alpha1.ReleaseSpec{Placement: v1alpha1.ReleasePlacement{Name: "web"}}}
	members := []v1alpha1.ReleaseMemberStatus{
		{Cluster: "m1", Phase: v1alpha1.PhaseReady, Feedback: []v1alpha1.ReleaseFeedbackValue{{Name: "address", Value: "10.0.0.1"}, {Name: "version", Value: "v2\x1b[2J"}}},
		{Cluster: "m2", Phase: v1alpha1.PhasePending},
	}
	var out bytes.Buffer
	require.NoError(t, describeRelease(&out, rel, members, time.Now()))
	require.Regexp(t, `(?m)^Feedback:\n\s+m1\s+address=10.0.0.1, version=v2\^\[\[2J\n\s+m2\s+-$`, out.String())
}

// Each member's shares of spec.divide are shown, a member without one as -.
func TestDescribeReleaseShowsShares(t *testing.T) {
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "fleet"}, Spec: v1alpha1.ReleaseSpec{Placement: v1alpha1.ReleasePlacement{Name: "web"}}}
	members := []v1alpha1.ReleaseMemberStatus{
		{Cluster: "m2", Phase: v1alpha1.PhaseDeparted, Shares: []v1alpha1.ReleaseMemberShare{{Name: "shop", Replicas: 2}}},
		{Cluster: "m1", Phase: v1alpha1.PhaseReady, Shares: []v1alpha1.ReleaseMemberShare{{Name: "shop", Replicas: 4}, {Name: "worker", Replicas: 1}}},
		{Cluster: "m3", Phase: v1alpha1.PhasePending},
	}
	var out bytes.Buffer
	require.NoError(t, describeRelease(&out, rel, members, time.Now()))
	require.Regexp(t, `(?m)^Shares \(spec.divide\):\n\s+m1\s+shop=4, worker=1\n\s+m2\s+shop=2\n\s+m3\s+-$`, out.String())

	var none bytes.Buffer
	require.NoError(t, describeRelease(&none, rel, members[2:], time.Now()))
	require.NotContains(t, none.String(), "Shares", "a Release that divides nothing shows no shares")
}

// get releases -o wide sums what spec.feedback read up: a value all members agree on once, values
// that differ the commonest first with their counts, at most three and the rest counted, as text.
func TestSummarizeFeedback(t *testing.T) {
	member := func(values ...string) v1alpha1.ReleaseMemberStatus {
		m := v1alpha1.ReleaseMemberStatus{Phase: v1alpha1.PhaseReady}
		for i := 0; i+1 < len(values); i += 2 {
			m.Feedback = append(m.Feedback, v1alpha1.ReleaseFeedbackValue{Name: values[i], Value: values[i+1]})
		}
		return m
	}
	require.Equal(t, "-", summarizeFeedback([]v1alpha1.ReleaseMemberStatus{member(), member()}))
	require.Equal(t, "address=10.0.0.1(1),<none>(1) version=1.2", summarizeFeedback([]v1alpha1.ReleaseMemberStatus{
		member("version", "1.2", "address", "10.0.0.1"), member("version", "1.2", "address", ""), member()}))
	require.Equal(t, "version=1.1(3),2.0^[[2J(2),0.9(1),+1", summarizeFeedback([]v1alpha1.ReleaseMemberStatus{
		member("version", "1.1"), member("version", "2.0\x1b[2J"), member("version", "1.1"), member("version", "1.0"),
		member("version", "1.1"), member("version", "2.0\x1b[2J"), member("version", "0.9")}))
}

// get releases -o wide reads the slices of the Releases it prints, by name when they are few.
func TestFeedbackReadsTheSlicesOfWhatItPrints(t *testing.T) {
	rel := func(name string) *v1alpha1.Release {
		return &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	require.Equal(t, "clusterregistry.k8s.io/release in (db,web)", slicesOf([]*v1alpha1.Release{rel("web"), rel("db")}))
	many := make([]*v1alpha1.Release, 21)
	for i := range many {
		many[i] = rel(fmt.Sprintf("r%d", i))
	}
	require.Equal(t, v1alpha1.ReleaseLabel, slicesOf(many))
	require.Equal(t, v1alpha1.ReleaseLabel, slicesOf([]*v1alpha1.Release{rel(strings.Repeat("a", 64))}), "no slice carries a name past a label value's 63 characters")
}

// A member two slices name (handed between sharded replicas) counts once in the column, as the
// slice that last applied there says.
func TestFeedbackCountsAMemberInTwoSlicesOnce(t *testing.T) {
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "fleet", UID: "u1"},
		Spec: v1alpha1.ReleaseSpec{Feedback: []v1alpha1.ReleaseFeedback{{Name: "version", Kind: "ConfigMap", ObjectName: "v", JSONPath: "{.data.v}"}}}}
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(rel, v1alpha1.SchemeGroupVersion.WithKind("Release"))}
	at := func(s int) *metav1.Time { return &metav1.Time{Time: time.Unix(int64(s), 0)} }
	slice := func(name, value string, applied int) *v1alpha1.ReleaseStatusSlice {
		return &v1alpha1.ReleaseStatusSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet", OwnerReferences: owner,
			Labels: map[string]string{v1alpha1.ReleaseLabel: "web"}},
			Members: []v1alpha1.ReleaseMemberStatus{{Cluster: "m1", Phase: v1alpha1.PhaseReady, LastApplied: at(applied),
				Feedback: []v1alpha1.ReleaseFeedbackValue{{Name: "version", Value: value}}}}}
	}
	clientset := fake.NewClientset(slice("web-a-0", "1.0", 100), slice("web-b-0", "1.1", 200))
	require.Equal(t, map[types.UID]string{"u1": "version=1.1"}, releaseFeedback(t.Context(), clientset, []v1alpha1.Release{*rel}))
}
