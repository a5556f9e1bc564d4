package clusterprofile_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

const testTimeout = 60 * time.Second

func profilesClient() cpversioned.Interface { return cpversioned.NewForConfigOrDie(lf.Registry.Config) }

func registryClient() versioned.Interface { return versioned.NewForConfigOrDie(lf.Registry.Config) }

// startPublisher publishes the cluster set ns until the test ends: from a Fleet's members when
// fleet is set (PublishOptions.Members), else from the Publisher's own watch of Clusters.
func startPublisher(t *testing.T, ns string, fleet *multicluster.FleetOptions) {
	t.Helper()
	resolver, err := access.NewResolver(access.ResolverOptions{
		Secrets:  access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)),
		ClientIP: netip.MustParseAddr("127.0.0.1"),
	})
	require.NoError(t, err)
	opts := clusterprofile.PublishOptions{Namespaces: []string{ns}, Resolver: resolver}
	if fleet != nil {
		fleet.Namespaces = []string{ns}
		f := multicluster.NewFleet(registryClient(), resolver, *fleet)
		require.NoError(t, f.Start(context.Background()))
		t.Cleanup(f.Stop) // after the Publisher's (cleanups run last first)
		opts = clusterprofile.PublishOptions{Members: f}
	}
	p, err := clusterprofile.NewPublisher(registryClient(), profilesClient(), opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// profile is the ClusterProfile ns/name once cond holds for it.
func profile(t *testing.T, ns, name string, cond func(*cpv1alpha1.ClusterProfile) bool) *cpv1alpha1.ClusterProfile {
	t.Helper()
	var got *cpv1alpha1.ClusterProfile
	require.Eventually(t, func() bool {
		p, err := profilesClient().ApisV1alpha1().ClusterProfiles(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		got = p
		return cond(p)
	}, testTimeout, 20*time.Millisecond, "ClusterProfile %s/%s: %+v", ns, name, got)
	return got
}

func setReady(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	clusters := registryClient().ClusterregistryV1alpha1().Clusters(ns)
	c, err := clusters.Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	c.Status.Version = "v1.36.3"
	c.Status.ClusterID = "9f1c2d3e-kube-system"
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: "probed by the test"})
	_, err = clusters.UpdateStatus(context.Background(), c, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// A Cluster is published as a ClusterProfile of this registry: display name, version, cluster ID,
// ControlPlaneHealthy mirroring Ready, and the server and CA the Resolver chose, with no
// credential; an unchanged registry writes nothing; the profile goes with its Cluster. So it is
// whether the Publisher watches Clusters itself or follows a Fleet the process shares.
func TestPublishesClusters(t *testing.T) {
	t.Run("own watch", func(t *testing.T) { testPublishesClusters(t, nil) })
	t.Run("a Fleet's members", func(t *testing.T) { testPublishesClusters(t, &multicluster.FleetOptions{}) })
}

func testPublishesClusters(t *testing.T, fleet *multicluster.FleetOptions) {
	fleetmain.Integration(t)
	m := lf.Members[0]
	ns := fleettest.CopySet(t, lf)
	setReady(t, ns, m.Name, metav1.ConditionTrue, v1alpha1.ReasonReachable)
	startPublisher(t, ns, fleet)

	p := profile(t, ns, m.Name, func(p *cpv1alpha1.ClusterProfile) bool {
		return len(p.Status.Conditions) > 0 && p.Status.Version.Kubernetes != ""
	})
	require.Equal(t, clusterprofile.DefaultManagerName, p.Labels[cpv1alpha1.LabelClusterManagerKey])
	require.Equal(t, clusterprofile.DefaultManagerName, p.Spec.ClusterManager.Name)
	require.Equal(t, "Local member 1", p.Spec.DisplayName)
	require.Equal(t, "v1.36.3", p.Status.Version.Kubernetes)
	healthy := p.Status.Conditions[0]
	require.Equal(t, cpv1alpha1.ClusterConditionControlPlaneHealthy, healthy.Type)
	require.Equal(t, metav1.ConditionTrue, healthy.Status)
	require.Equal(t, v1alpha1.ReasonReachable, healthy.Reason)
	props := map[string]string{}
	for _, prop := range p.Status.Properties {
		props[prop.Name] = prop.Value
	}
	require.Equal(t, map[string]string{clusterprofile.PropertyClusterID: "9f1c2d3e-kube-system", clusterprofile.PropertyClusterSet: ns}, props)
	require.Len(t, p.Status.AccessProviders, 1)
	ap := p.Status.AccessProviders[0]
	require.Equal(t, clusterprofile.DefaultAccessProvider, ap.Name)
	require.Equal(t, m.URL(), ap.Cluster.Server)
	require.Equal(t, m.Config.CAData, ap.Cluster.CertificateAuthorityData)
	require.Len(t, ap.Cluster.Extensions, 1)
	require.JSONEq(t, `{"clusterName":"`+m.Name+`"}`, string(ap.Cluster.Extensions[0].Extension.Raw))
	require.Equal(t, "Cluster", p.OwnerReferences[0].Kind)
	// No credential: not the member's token, nor anything else of its Secret.
	token, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).Get(context.Background(), m.Name+"-token", metav1.GetOptions{})
	require.NoError(t, err)
	all, err := json.Marshal(p)
	require.NoError(t, err)
	require.NotContains(t, string(all), string(token.Data["token"]))

	// An unchanged registry writes nothing.
	time.Sleep(time.Second)
	again, err := profilesClient().ApisV1alpha1().ClusterProfiles(ns).Get(context.Background(), m.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, p.ResourceVersion, again.ResourceVersion, "the profile of an unchanged Cluster was written")

	// Ready turns False: so does ControlPlaneHealthy.
	setReady(t, ns, m.Name, metav1.ConditionFalse, v1alpha1.ReasonUnreachable)
	profile(t, ns, m.Name, func(p *cpv1alpha1.ClusterProfile) bool {
		return p.Status.Conditions[0].Status == metav1.ConditionFalse && p.Status.Conditions[0].Reason == v1alpha1.ReasonUnreachable
	})

	// Someone deletes the profile: it comes back.
	require.NoError(t, profilesClient().ApisV1alpha1().ClusterProfiles(ns).Delete(context.Background(), m.Name, metav1.DeleteOptions{}))
	profile(t, ns, m.Name, func(p *cpv1alpha1.ClusterProfile) bool { return len(p.Status.AccessProviders) == 1 })

	// The Cluster goes: so does its profile.
	fleettest.RemoveMember(t, lf, ns, m.Name)
	require.Eventually(t, func() bool {
		_, err := profilesClient().ApisV1alpha1().ClusterProfiles(ns).Get(context.Background(), m.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, testTimeout, 20*time.Millisecond)
}

// A Cluster that does not resolve (its Secret is missing) is published without an access
// provider, and another cluster manager's profile of a Cluster's name is left alone.
func TestPublishesNoUntrustedWayIn(t *testing.T) {
	fleetmain.Integration(t)
	ns := fleettest.CopySet(t, lf)
	clusters := registryClient().ClusterregistryV1alpha1().Clusters(ns)
	_, err := clusters.Create(context.Background(), &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "no-secret"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://attacker.example:6443"}}},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "token",
				Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret}, Config: map[string]string{"name": "nowhere"}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	foreign := &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "theirs", Labels: map[string]string{cpv1alpha1.LabelClusterManagerKey: "open-cluster-management"}},
		Spec:       cpv1alpha1.ClusterProfileSpec{DisplayName: "not ours", ClusterManager: cpv1alpha1.ClusterManager{Name: "open-cluster-management"}},
	}
	_, err = profilesClient().ApisV1alpha1().ClusterProfiles(ns).Create(context.Background(), foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	c, err := clusters.Get(context.Background(), lf.Members[0].Name, metav1.GetOptions{})
	require.NoError(t, err)
	c.ObjectMeta = metav1.ObjectMeta{Name: "theirs"}
	_, err = clusters.Create(context.Background(), c, metav1.CreateOptions{})
	require.NoError(t, err)
	startPublisher(t, ns, nil)

	p := profile(t, ns, "no-secret", func(p *cpv1alpha1.ClusterProfile) bool { return len(p.Status.Conditions) > 0 })
	require.Empty(t, p.Status.AccessProviders, "a Cluster the Resolver refuses was published with a way in")
	require.Equal(t, metav1.ConditionUnknown, p.Status.Conditions[0].Status)
	// The member's profile is published; the foreign one, whose name a Cluster shares, is not touched.
	profile(t, ns, lf.Members[0].Name, func(p *cpv1alpha1.ClusterProfile) bool { return len(p.Status.AccessProviders) == 1 })
	got, err := profilesClient().ApisV1alpha1().ClusterProfiles(ns).Get(context.Background(), "theirs", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "open-cluster-management", got.Spec.ClusterManager.Name)
	require.Equal(t, "not ours", got.Spec.DisplayName)
	require.Empty(t, got.Status.AccessProviders)
}

// A member that leaves the Publisher's Members while its Cluster stays (another replica owns it
// now, or, as here, it no longer matches the Fleet's selector) keeps its profile: it is not this
// Publisher's to delete. Deleted, its Cluster's profile goes.
func TestMemberLeavingKeepsItsProfile(t *testing.T) {
	fleetmain.Integration(t)
	m := lf.Members[0]
	ns := fleettest.CopySet(t, lf)
	clusters := registryClient().ClusterregistryV1alpha1().Clusters(ns)
	label := func(value string) {
		t.Helper()
		patch := `{"metadata":{"labels":{"published":"` + value + `"}}}`
		_, err := clusters.Patch(context.Background(), m.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	label("yes")
	startPublisher(t, ns, &multicluster.FleetOptions{Selector: labels.SelectorFromSet(labels.Set{"published": "yes"})})
	before := profile(t, ns, m.Name, func(p *cpv1alpha1.ClusterProfile) bool { return len(p.Status.AccessProviders) == 1 })

	label("no")
	time.Sleep(time.Second) // what the Publisher would have done by now, were it wrong
	after, err := profilesClient().ApisV1alpha1().ClusterProfiles(ns).Get(context.Background(), m.Name, metav1.GetOptions{})
	require.NoError(t, err, "the profile of a Cluster that left the Publisher's members, and still exists, was deleted")
	require.Equal(t, before.UID, after.UID)

	// Back in the Fleet (followed again: its status shows), then deleted: the profile goes with
	// the Cluster.
	label("yes")
	setReady(t, ns, m.Name, metav1.ConditionFalse, v1alpha1.ReasonUnreachable)
	profile(t, ns, m.Name, func(p *cpv1alpha1.ClusterProfile) bool {
		return len(p.Status.Conditions) > 0 && p.Status.Conditions[0].Reason == v1alpha1.ReasonUnreachable
	})
	fleettest.RemoveMember(t, lf, ns, m.Name)
	require.Eventually(t, func() bool {
		_, err := profilesClient().ApisV1alpha1().ClusterProfiles(ns).Get(context.Background(), m.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, testTimeout, 20*time.Millisecond)
}
