package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// install on a registry without the CRD, twice, then RBAC per cluster set: a user bound to the
// edit role in one namespace writes Clusters there, only reads another set bound to view, and
// sees nothing of a third.
func TestInstall(t *testing.T) {
	realservers.Required(t)
	lf := localfleet.StartForTest(t, localfleet.Options{Bare: true}) // no CRD yet
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(lf.Registry.Config)

	installs := func(ns string) string {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"install", "--kubeconfig", lf.Registry.Kubeconfig, "--create-namespace", "-n", ns}, &stdout, &stderr)
		require.Equal(t, 0, code, "stderr: %s", stderr.String())
		return stdout.String()
	}
	out := installs("team-a")
	require.Contains(t, out, "CRD clusters.clusterregistry.k8s.io created with schema version")
	require.Contains(t, out, "CRD placements.clusterregistry.k8s.io created with schema version")
	require.Contains(t, out, "ClusterRole clusterregistry-view applied (aggregated into [view edit admin])")
	require.Contains(t, out, "ClusterRole clusterregistry-edit applied (aggregated into [edit admin])")
	require.Contains(t, out, "Namespace team-a created, a cluster set")
	out = installs("team-a")
	require.Contains(t, out, "is up to date")
	require.Contains(t, out, "Namespace team-a exists")
	installs("team-b")
	installs("team-c")

	view, err := admin.RbacV1().ClusterRoles().Get(ctx, viewRole, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "true", view.Labels["rbac.authorization.k8s.io/aggregate-to-view"])
	s := &installed{lf: lf, ctx: ctx, admin: admin, installs: installs}
	s.rolesGrantWhatTheySay(t)
	s.manifestsAreWhatInstallMakes(t)
	s.missingSetNamed(t)
	s.clusterProfilesRefused(t)
}

// installed is what the parts of TestInstall share, in order.
type installed struct {
	lf       *localfleet.Fleet
	ctx      context.Context
	admin    *kubernetes.Clientset
	installs func(ns string) string
}

// rolesGrantWhatTheySay: the edit and view roles install makes grant what they say, on Clusters,
// Placements and Releases.
func (s *installed) rolesGrantWhatTheySay(t *testing.T) {
	lf, ctx, admin := s.lf, s.ctx, s.admin
	// alice edits team-a and views team-b.
	for ns, role := range map[string]string{"team-a": editRole, "team-b": viewRole} {
		_, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "alice"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	kubeconfig, err := lf.Registry.AddUser("alice")
	require.NoError(t, err)
	aliceConfig, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	require.NoError(t, err)
	alice := versioned.NewForConfigOrDie(aliceConfig).ClusterregistryV1alpha1()
	cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "prod-eu-1"}, Spec: v1alpha1.ClusterSpec{
		KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://prod-eu-1.example.com:6443"}}}}}

	_, err = alice.Clusters("team-a").Create(ctx, cluster, metav1.CreateOptions{})
	require.NoError(t, err, "an editor of team-a writes its Clusters")
	_, err = alice.Clusters("team-b").Create(ctx, cluster, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a viewer of team-b wrote a Cluster: %v", err)
	_, err = alice.Clusters("team-b").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "a viewer of team-b reads its Clusters")
	_, err = alice.Clusters("team-c").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "alice read team-c, where she has no role: %v", err)
	// The same roles cover Placements.
	web := &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.PlacementSpec{Count: ptr.To[int32](2)}}
	_, err = alice.Placements("team-a").Create(ctx, web, metav1.CreateOptions{})
	require.NoError(t, err, "an editor of team-a writes its Placements")
	_, err = alice.Placements("team-b").Create(ctx, web, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a viewer of team-b wrote a Placement: %v", err)
	_, err = alice.Placements("team-b").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "a viewer of team-b reads its Placements")
	// And Releases: creating one acts on the set's members, so a viewer may not; the status
	// slices are the controller's, read by both.
	release := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web"}}`)}}},
		Placement: v1alpha1.ReleasePlacement{Name: "web"}}}
	_, err = alice.Releases("team-a").Create(ctx, release, metav1.CreateOptions{})
	require.NoError(t, err, "an editor of team-a writes its Releases")
	_, err = alice.Releases("team-b").Create(ctx, release, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a viewer of team-b created a Release: %v", err)
	_, err = alice.Releases("team-b").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "a viewer of team-b reads its Releases")
	_, err = alice.ReleaseStatusSlices("team-b").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "a viewer of team-b reads its Releases' status slices")
	_, err = alice.ReleaseStatusSlices("team-a").Create(ctx, &v1alpha1.ReleaseStatusSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "an editor wrote a status slice, the controller's to write: %v", err)
	edit, err := admin.RbacV1().ClusterRoles().Get(ctx, editRole, metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, edit.Annotations["kubernetes.io/description"], "with the power of their accounts", "the edit role says what writing a Release grants")
}

// manifestsAreWhatInstallMakes: the dry run's manifests, applied with kubectl, are what install
// makes.
func (s *installed) manifestsAreWhatInstallMakes(t *testing.T) {
	lf, ctx, installs := s.lf, s.ctx, s.installs
	// The dry run's manifests, applied with kubectl, are what install makes: install then finds
	// everything in place.
	var manifests, stderr bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"install", "--dry-run=client", "--create-namespace", "-n", "team-d"}, &manifests, &stderr), stderr.String())
	file := filepath.Join(t.TempDir(), "registry.yaml")
	require.NoError(t, os.WriteFile(file, manifests.Bytes(), 0o600))
	applied, err := exec.CommandContext(ctx, lf.Kubectl, "--kubeconfig", lf.Registry.Kubeconfig, "apply", "--server-side", "--force-conflicts", "--field-manager", fieldManager, "-f", file).CombinedOutput()
	require.NoError(t, err, "%s", applied)
	out := installs("team-d")
	require.Equal(t, len(clusterregistry.CRDs()), strings.Count(out, "is up to date"), out)
	require.Contains(t, out, "Namespace team-d exists")
}

// missingSetNamed: -n without --create-namespace names a cluster set that does not exist, and does
// not make it.
func (s *installed) missingSetNamed(t *testing.T) {
	lf, ctx, admin := s.lf, s.ctx, s.admin
	// -n without --create-namespace: a cluster set that does not exist is named, not made.
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"install", "--kubeconfig", lf.Registry.Kubeconfig, "-n", "team-e"}, &stdout, &stderr), stderr.String())
	require.Contains(t, stdout.String(), "note: namespace team-e does not exist, so there is no such cluster set yet; --create-namespace makes it")
	_, err := admin.CoreV1().Namespaces().Get(ctx, "team-e", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "install made a namespace without --create-namespace: %v", err)
}

// clusterProfilesRefused: without the ClusterProfile CRD, health --cluster-profiles and
// controllers' clusterprofiles are refused at start, naming the flag given.
func (s *installed) clusterProfilesRefused(t *testing.T) {
	lf, ctx := s.lf, s.ctx
	// health --cluster-profiles on a registry without the ClusterProfile CRD (install does not
	// make it) is refused at start, saying what to install; before, it ran on and logged a raw
	// watch error every second or two.
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"health", "--kubeconfig", lf.Registry.Kubeconfig, "-n", "team-a", "--cluster-profiles"}, &stdout, &stderr)
	require.Equal(t, 1, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	require.Less(t, time.Since(start), 20*time.Second)
	require.Contains(t, stderr.String(), "--cluster-profiles: ClusterProfiles (multicluster.x-k8s.io/v1alpha1) are not served: the ClusterProfile CRD is not installed; install it: kubectl apply -f https://")
	require.NotContains(t, stderr.String(), "watch", "a watch started, and failed")

	// The controllers command names the flag its user gave, not health's.
	stdout.Reset()
	stderr.Reset()
	code = run(ctx, []string{"controllers", "--kubeconfig", lf.Registry.Kubeconfig, "-n", "team-a", "--controllers", "health,clusterprofiles"}, &stdout, &stderr)
	require.Equal(t, 1, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	require.Contains(t, stderr.String(), "--controllers clusterprofiles: ClusterProfiles (multicluster.x-k8s.io/v1alpha1) are not served")
	require.NotContains(t, stderr.String(), "--cluster-profiles")
}
