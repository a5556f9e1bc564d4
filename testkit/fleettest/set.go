package fleettest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// Context ends when the test does, or after timeout.
func Context(tb testing.TB, timeout time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	tb.Cleanup(cancel)
	return ctx
}

// setSeq numbers the tests' cluster sets, so that -count=N runs each test anew.
var setSeq atomic.Int64

// NeedFleet skips a test that needs the package's local fleet under -short, where Main starts
// none, and fails it when the fleet is missing otherwise.
func NeedFleet(tb testing.TB, lf *localfleet.Fleet) {
	tb.Helper()
	if lf != nil {
		return
	}
	realservers.Required(tb)
	tb.Fatal("no local fleet: the package's TestMain did not start one")
}

// NewSet makes an empty cluster set in the local fleet's registry, named after the test, and
// returns its namespace.
func NewSet(tb testing.TB, lf *localfleet.Fleet) string {
	tb.Helper()
	NeedFleet(tb, lf)
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	ns := setName(tb.Name(), setSeq.Add(1))
	_, err := kube.CoreV1().Namespaces().Create(Context(tb, time.Minute), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(tb, err)
	return ns
}

// setName is a namespace name for the test named test: lower case, anything but letters and
// digits a dash, short enough for a label value with its sequence number.
func setName(test string, seq int64) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(test))
	suffix := fmt.Sprintf("-%d", seq)
	if max := 63 - len(suffix); len(name) > max {
		name = name[:max]
	}
	return strings.Trim(name, "-") + suffix
}

// CopySet copies the local fleet's credential Secrets, and the Clusters of the named members
// (every member when none is named), into a new cluster set named after the test, which the test
// may change; it returns the set's namespace.
func CopySet(tb testing.TB, lf *localfleet.Fleet, members ...string) string {
	tb.Helper()
	NeedFleet(tb, lf)
	ctx := Context(tb, time.Minute)
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	ns := NewSet(tb, lf)
	secrets, err := kube.CoreV1().Secrets(lf.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(tb, err)
	for _, s := range secrets.Items {
		s.ObjectMeta = metav1.ObjectMeta{Name: s.Name, Namespace: ns, Annotations: s.Annotations, Labels: s.Labels}
		_, err := kube.CoreV1().Secrets(ns).Create(ctx, &s, metav1.CreateOptions{})
		require.NoError(tb, err)
	}
	if len(members) == 0 {
		for _, m := range lf.Members {
			members = append(members, m.Name)
		}
	}
	for _, m := range members {
		AddMember(tb, lf, ns, m)
	}
	return ns
}

// AddMember copies the local fleet's Cluster of the named member into the cluster set ns.
func AddMember(tb testing.TB, lf *localfleet.Fleet, ns, member string) {
	tb.Helper()
	ctx := Context(tb, time.Minute)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	c, err := registry.Clusters(lf.Namespace).Get(ctx, member, metav1.GetOptions{})
	require.NoError(tb, err)
	c.ObjectMeta = metav1.ObjectMeta{Name: c.Name, Namespace: ns, Labels: c.Labels}
	_, err = registry.Clusters(ns).Create(ctx, c, metav1.CreateOptions{})
	require.NoError(tb, err)
}

// RemoveMember deletes the named member's Cluster from the cluster set ns.
func RemoveMember(tb testing.TB, lf *localfleet.Fleet, ns, member string) {
	tb.Helper()
	err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns).Delete(Context(tb, time.Minute), member, metav1.DeleteOptions{})
	require.NoError(tb, err)
}

// MemberNames are the names of the local fleet's members, in order.
func MemberNames(lf *localfleet.Fleet) []string {
	var names []string
	for _, m := range lf.Members {
		names = append(names, m.Name)
	}
	return slices.Clip(names)
}
