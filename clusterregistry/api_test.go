package clusterregistry_test

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	crapply "github.com/cluster-registry/sdk/applyconfiguration/clusterregistry/v1alpha1"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

func TestCreateGetListUpdateDelete(t *testing.T) {
	ctx := testContext(t)
	ns := newNamespace(t)
	clusters := registryClient(t).ClusterregistryV1alpha1().Clusters(ns)

	created, err := clusters.Create(ctx, newCluster("alpha"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := clusters.Get(ctx, "alpha", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Spec.KubernetesAPIEndpoints.CABundle) != string(testCAPEM) {
		t.Error("caBundle did not survive the round trip through the server")
	}
	if got.Spec.AuthInfo.Providers[0].Config["name"] != "alpha-token" || got.Namespace != ns {
		t.Errorf("got %+v", got)
	}

	got.Spec.DisplayName = "Alpha, renamed"
	updated, err := clusters.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Spec.DisplayName != "Alpha, renamed" || updated.ResourceVersion == created.ResourceVersion {
		t.Errorf("update not applied: %+v", updated.Spec)
	}
	// An update from a stale copy is refused, not silently applied over the newer one.
	created.Spec.DisplayName = "stale"
	if _, err := clusters.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: got %v, want a conflict", err)
	}

	if _, err := clusters.Create(ctx, newCluster("beta"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := clusters.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if names := clusterNames(list.Items); !slices.Equal(names, []string{"alpha", "beta"}) {
		t.Errorf("list: %v", names)
	}

	if err := clusters.Delete(ctx, "alpha", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clusters.Get(ctx, "alpha", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after delete: %v", err)
	}
	if err := clusters.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if list, err := clusters.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("after deletecollection: %v, %v", clusterNames(list.Items), err)
	}
}

func TestListByLabelSelector(t *testing.T) {
	ctx := testContext(t)
	ns := newNamespace(t)
	clusters := registryClient(t).ClusterregistryV1alpha1().Clusters(ns)
	for name, labels := range map[string]map[string]string{
		"eu-prod": {"region": "eu", "env": "prod"},
		"eu-dev":  {"region": "eu", "env": "dev"},
		"us-prod": {"region": "us", "env": "prod"},
	} {
		c := newCluster(name)
		c.Labels = labels
		if _, err := clusters.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for selector, want := range map[string][]string{
		"env=prod":              {"eu-prod", "us-prod"},
		"region=eu,env!=prod":   {"eu-dev"},
		"region in (us)":        {"us-prod"},
		"region, env notin (x)": {"eu-dev", "eu-prod", "us-prod"},
		"region=ap":             nil,
	} {
		list, err := clusters.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		if got := clusterNames(list.Items); !slices.Equal(got, want) {
			t.Errorf("selector %q: got %v, want %v", selector, got, want)
		}
	}
}

func TestPatch(t *testing.T) {
	ctx := testContext(t)
	ns := newNamespace(t)
	clusters := registryClient(t).ClusterregistryV1alpha1().Clusters(ns)
	if _, err := clusters.Create(ctx, newCluster("gamma"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	merge := []byte(`{"metadata":{"annotations":{"team":"platform"}},"spec":{"displayName":"Gamma (merged)"}}`)
	got, err := clusters.Patch(ctx, "gamma", types.MergePatchType, merge, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.DisplayName != "Gamma (merged)" || got.Annotations["team"] != "platform" {
		t.Errorf("merge patch: %q %v", got.Spec.DisplayName, got.Annotations)
	}
	if len(got.Spec.KubernetesAPIEndpoints.ServerEndpoints) != 1 {
		t.Error("merge patch dropped fields it did not name")
	}

	jsonPatch := []byte(`[
		{"op":"test","path":"/spec/displayName","value":"Gamma (merged)"},
		{"op":"add","path":"/spec/kubernetesApiEndpoints/serverEndpoints/-","value":{"clientCIDR":"10.0.0.0/8","serverAddress":"10.0.0.10:6443"}}
	]`)
	got, err = clusters.Patch(ctx, "gamma", types.JSONPatchType, jsonPatch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if eps := got.Spec.KubernetesAPIEndpoints.ServerEndpoints; len(eps) != 2 || eps[1].ServerAddress != "10.0.0.10:6443" {
		t.Errorf("json patch: %+v", eps)
	}

	// A patch that would make the object invalid is refused whole.
	bad := []byte(`{"spec":{"displayName":"ok","authInfo":{"providers":[{"name":"p","type":{"name":"secret"},"config":{"token":"x"}}]}}}`)
	if _, err := clusters.Patch(ctx, "gamma", types.MergePatchType, bad, metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid merge patch: %v", err)
	}
	if got, _ := clusters.Get(ctx, "gamma", metav1.GetOptions{}); got.Spec.DisplayName != "Gamma (merged)" {
		t.Errorf("rejected patch was half applied: displayName %q", got.Spec.DisplayName)
	}
}

// Server-side apply through the generated apply configurations: two managers own different
// parts, list entries merge by their keys (clientCIDR, provider name), and a conflict on a field
// another manager owns is reported unless forced.
func TestServerSideApply(t *testing.T) {
	ctx := testContext(t)
	ns := newNamespace(t)
	clusters := registryClient(t).ClusterregistryV1alpha1().Clusters(ns)

	registrar := crapply.Cluster("delta", ns).
		WithLabels(map[string]string{"env": "prod"}).
		WithSpec(crapply.ClusterSpec().
			WithDisplayName("Delta").
			WithKubernetesAPIEndpoints(crapply.KubernetesAPIEndpoints().
				WithServerEndpoints(crapply.ServerAddressByClientCIDR().
					WithClientCIDR("0.0.0.0/0").WithServerAddress("https://delta.example.com"))))
	if _, err := clusters.Apply(ctx, registrar, metav1.ApplyOptions{FieldManager: "registrar"}); err != nil {
		t.Fatal(err)
	}

	// Another tool adds its own endpoint and provider without touching the registrar's.
	network := crapply.Cluster("delta", ns).
		WithSpec(crapply.ClusterSpec().
			WithKubernetesAPIEndpoints(crapply.KubernetesAPIEndpoints().
				WithServerEndpoints(crapply.ServerAddressByClientCIDR().
					WithClientCIDR("10.0.0.0/8").WithServerAddress("10.0.0.7:6443"))).
			WithAuthInfo(crapply.AuthInfo().WithProviders(crapply.AuthProviderConfig().
				WithName("ops").WithType(crapply.AuthProviderType().WithName(v1alpha1.ProviderTypeExec)).
				WithConfig(map[string]string{"command": "ops-login"}))))
	got, err := clusters.Apply(ctx, network, metav1.ApplyOptions{FieldManager: "network-tool"})
	if err != nil {
		t.Fatal(err)
	}
	if eps := got.Spec.KubernetesAPIEndpoints.ServerEndpoints; len(eps) != 2 {
		t.Errorf("endpoints did not merge by clientCIDR: %+v", eps)
	}
	if got.Spec.DisplayName != "Delta" || len(got.Spec.AuthInfo.Providers) != 1 {
		t.Errorf("second manager disturbed the first: %+v", got.Spec)
	}

	// An apply states a manager's whole intent. The network tool may not take the registrar's
	// display name without forcing.
	network.Spec.WithDisplayName("Mine")
	if _, err := clusters.Apply(ctx, network, metav1.ApplyOptions{FieldManager: "network-tool"}); !apierrors.IsConflict(err) {
		t.Errorf("apply over another manager's field: got %v, want a conflict", err)
	}
	if got, err = clusters.Apply(ctx, network, metav1.ApplyOptions{FieldManager: "network-tool", Force: true}); err != nil || got.Spec.DisplayName != "Mine" {
		t.Fatalf("forced apply: %v, %q", err, got.Spec.DisplayName)
	}

	checkExtract(t, ctx, clusters, ns, got)

	// The registrar applies again without its endpoint: the entry it alone owned goes, the network
	// tool's stays.
	registrar.Spec.KubernetesAPIEndpoints.ServerEndpoints = nil
	registrar.Spec.DisplayName = nil
	if got, err = clusters.Apply(ctx, registrar, metav1.ApplyOptions{FieldManager: "registrar"}); err != nil {
		t.Fatal(err)
	}
	if eps := got.Spec.KubernetesAPIEndpoints.ServerEndpoints; len(eps) != 1 || eps[0].ClientCIDR != "10.0.0.0/8" {
		t.Errorf("after the registrar dropped its endpoint: %+v", eps)
	}

	// Giving up the last entry of a list empties it. Server-side apply writes null for the emptied
	// struct, which the schema takes because those structs default to {}.
	network.Spec.KubernetesAPIEndpoints.ServerEndpoints = nil
	network.Spec.AuthInfo.Providers = nil
	if got, err = clusters.Apply(ctx, network, metav1.ApplyOptions{FieldManager: "network-tool"}); err != nil {
		t.Fatalf("apply giving up the last endpoint and provider: %v", err)
	}
	if len(got.Spec.KubernetesAPIEndpoints.ServerEndpoints) != 0 || len(got.Spec.AuthInfo.Providers) != 0 {
		t.Errorf("entries left after their only manager gave them up: %+v", got.Spec)
	}
}

// checkExtract: Extract reads a manager's intent back from got, as the server recorded it, with
// the schema the apply configurations embed, which must agree with the CRD's on which lists are
// maps; and a status applied by another manager reads back the same way.
func checkExtract(t *testing.T, ctx context.Context, clusters crv1alpha1.ClusterInterface, ns string, got *v1alpha1.Cluster) {
	t.Helper()
	mine, err := crapply.ExtractCluster(got, "registrar")
	if err != nil {
		t.Fatalf("ExtractCluster: %v", err)
	}
	if mine.Spec.DisplayName != nil || mine.Labels["env"] != "prod" ||
		len(mine.Spec.KubernetesAPIEndpoints.ServerEndpoints) != 1 || *mine.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ClientCIDR != "0.0.0.0/0" {
		t.Errorf("registrar's fields after the forced apply took displayName: %+v", mine)
	}
	status := crapply.Cluster("delta", ns).WithStatus(crapply.ClusterStatus().WithVersion("v1.36.3"))
	if got, err = clusters.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: "health"}); err != nil {
		t.Fatalf("ApplyStatus: %v", err)
	}
	if probed, err := crapply.ExtractClusterStatus(got, "health"); err != nil || probed.Status == nil || *probed.Status.Version != "v1.36.3" {
		t.Errorf("ExtractClusterStatus: %+v, %v", probed, err)
	}
}

func clusterNames(items []v1alpha1.Cluster) []string {
	var names []string
	for _, c := range items {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}
