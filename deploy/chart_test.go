// Package deploy_test checks what deploy/ ships: the chart renders, with Helm's own loader and
// engine, to objects a real registry takes (server-side dry run), with the RBAC of deploy/'s
// manifests (one home: a rule that differs fails here).
package deploy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

const releaseNamespace = "clusterregistry-system"

// render renders deploy/chart as release "clusterregistry" with vals, as helm template
// --skip-schema-validation would: the templates refuse what cannot work on their own too
// (TestChartValuesSchema checks the schema).
func render(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderAs(t, "clusterregistry", vals)
}

// renderAs is render as release name.
func renderAs(t *testing.T, name string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	chrt, err := loader.Load("chart")
	require.NoError(t, err)
	values, err := chartutil.ToRenderValuesWithSchemaValidation(chrt, vals,
		common.ReleaseOptions{Name: name, Namespace: releaseNamespace, IsInstall: true}, common.DefaultCapabilities, true)
	require.NoError(t, err)
	files, err := engine.Engine{Strict: true}.RenderWithContext(t.Context(), chrt, values)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []*unstructured.Unstructured
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		out = append(out, decode(t, name, files[name])...)
	}
	return out, nil
}

// decode reads the objects of a YAML stream.
func decode(t *testing.T, name, data string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, name)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &m), "%s:\n%s", name, doc)
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// deployRoles are the ClusterRoles of deploy/'s manifests, by name.
func deployRoles(t *testing.T) map[string]rbacv1.ClusterRole {
	t.Helper()
	files, err := filepath.Glob("health/*.yaml")
	require.NoError(t, err)
	more, err := filepath.Glob("controllers/*.yaml")
	require.NoError(t, err)
	api, err := filepath.Glob("fleet-api/*.yaml")
	require.NoError(t, err)
	tunnelRoles, err := filepath.Glob("tunnel/*.yaml")
	require.NoError(t, err)
	out := map[string]rbacv1.ClusterRole{}
	for _, f := range append(append(append(files, more...), api...), tunnelRoles...) {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, u := range decode(t, f, string(data)) {
			if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
				continue
			}
			var role rbacv1.ClusterRole // a Role's fields are a ClusterRole's
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role))
			out[u.GetKind()+"/"+role.Name] = role
		}
	}
	return out
}

func objectsOf(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// deploymentOf is the Deployment whose name ends in suffix ("-controllers", "-fleet-api").
func deploymentOf(t *testing.T, objs []*unstructured.Unstructured, suffix string) appsv1.Deployment {
	t.Helper()
	var ds []*unstructured.Unstructured
	for _, o := range objectsOf(objs, "Deployment") {
		if strings.HasSuffix(o.GetName(), suffix) {
			ds = append(ds, o)
		}
	}
	require.Len(t, ds, 1, "Deployments named *%s", suffix)
	var d appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(ds[0].Object, &d))
	return d
}

// The chart, rendered by Helm's engine with its defaults and with one cluster set, sharded, and
// ClusterProfiles: each ClusterRole has the rules of deploy/'s same-named one; the roles are bound
// cluster-wide, or in the cluster set alone; the Deployment runs the image's numeric non-root
// user with the controllers' flags; a registry takes every object (server-side dry run). Values
// that cannot work are refused, naming the value.
func TestChartRendersWhatTheRegistryTakes(t *testing.T) {
	realservers.Required(t)
	lf := localfleet.StartForTest(t, localfleet.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	dyn := dynamic.NewForConfigOrDie(lf.Registry.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(lf.Registry.Config)))
	want := deployRoles(t)

	for _, tc := range chartCases(lf.Namespace) {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := render(t, tc.values)
			require.NoError(t, err)

			requireChartRoles(t, objs, tc, want)

			requireControllers(t, objs, tc, want, lf.Namespace)

			requireFleetAPI(t, objs, tc)

			requireTunnel(t, objs, tc)

			requireRegistryTakes(t, ctx, objs, mapper, dyn)
		})
	}

	t.Run("values that cannot work are refused, naming the value", func(t *testing.T) {
		_, err := render(t, map[string]any{"controllers": []any{"health", "deliveries"}})
		require.ErrorContains(t, err, `values.controllers: "deliveries" is not a controller`)
		_, err = render(t, map[string]any{"sharding": map[string]any{"enabled": true, "group": ""}})
		require.ErrorContains(t, err, "values.sharding.group")
		_, err = render(t, map[string]any{"fleetAPI": map[string]any{"enabled": true, "optikonClusterSet": "edge"}})
		require.ErrorContains(t, err, "values.fleetAPI.tls.secretName")
		_, err = render(t, map[string]any{"fleetAPI": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "fleet-api-tls"}}})
		require.ErrorContains(t, err, "values.fleetAPI.optikonClusterSet")
		_, err = render(t, map[string]any{"tunnel": map[string]any{"enabled": true, "frontendSecretName": "f", "agentSecretName": "a"}})
		require.ErrorContains(t, err, "values.tunnel.readerSecretName")
	})
}

// chartCase is a rendering of the chart: its values, and what the rendering must hold.
type chartCase struct {
	name    string
	values  map[string]any
	bound   string // the namespace of the roles' bindings; "" for cluster-wide
	sharded bool
	roles   []string
	// fleetAPI: the chart also runs fleet-api; tunnel: and the tunnel server
	fleetAPI, tunnel bool
}

// chartCases are the renderings TestChartRendersWhatTheRegistryTakes checks; ns is a cluster set.
func chartCases(ns string) []chartCase {
	return []chartCase{
		{name: "defaults", roles: []string{"clusterregistry-health", "clusterregistry-health-rotation", "clusterregistry-placements", "clusterregistry-releases"}},
		{name: "with fleet-api",
			values: map[string]any{"fleetAPI": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "fleet-api-tls"}, "allowedHosts": []any{"fleet.example.com"}, "corsAllowedOrigins": []any{"https://optikon.example.com:30800"}, "optikonClusterSet": "edge"}},
			roles:  []string{"clusterregistry-health", "clusterregistry-health-rotation", "clusterregistry-placements", "clusterregistry-releases", "clusterregistry-fleet-api"}, fleetAPI: true},
		{name: "with the tunnel server, and fleet-api",
			values: map[string]any{"fleetAPI": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "fleet-api-tls"}, "optikonClusterSet": "edge",
				"allowedHosts": []any{"fleet.example.com"}, "corsAllowedOrigins": []any{"https://optikon.example.com:30800"}},
				"tunnel": map[string]any{"enabled": true, "frontendSecretName": "tunnel-frontend", "agentSecretName": "tunnel-agents", "readerSecretName": "tunnel-reader"}},
			roles:    []string{"clusterregistry-health", "clusterregistry-health-rotation", "clusterregistry-placements", "clusterregistry-releases", "clusterregistry-fleet-api", "clusterregistry-tunnel", "clusterregistry-tunnel-accounts"},
			fleetAPI: true, tunnel: true},
		{name: "one set, with the tunnel server",
			values: map[string]any{"clusterSet": ns, "tunnel": map[string]any{"enabled": true, "frontendSecretName": "tunnel-frontend", "agentSecretName": "tunnel-agents", "readerSecretName": "tunnel-reader"}},
			bound:  ns,
			roles:  []string{"clusterregistry-health", "clusterregistry-health-rotation", "clusterregistry-placements", "clusterregistry-releases", "clusterregistry-tunnel", "clusterregistry-tunnel-accounts"},
			tunnel: true},
		{name: "one set, sharded, with ClusterProfiles",
			values: map[string]any{"clusterSet": ns, "sharding": map[string]any{"enabled": true}, "controllers": []any{"health", "clusterprofiles", "releases"}, "image": map[string]any{"tag": "v9.9.9"}},
			bound:  ns, sharded: true,
			roles: []string{"clusterregistry-health", "clusterregistry-health-clusterprofiles", "clusterregistry-releases"}},
	}
}

// requireChartRoles: the chart's ClusterRoles are deploy/'s, those tc names, bound cluster-wide or
// in tc.bound.
func requireChartRoles(t *testing.T, objs []*unstructured.Unstructured, tc chartCase, want map[string]rbacv1.ClusterRole) {
	t.Helper()
	var roles []string
	for _, u := range objectsOf(objs, "ClusterRole") {
		var role rbacv1.ClusterRole
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role))
		shipped, ok := want["ClusterRole/"+role.Name]
		require.True(t, ok, "the chart's ClusterRole %s is not in deploy/", role.Name)
		require.Equal(t, shipped.Rules, role.Rules, "ClusterRole %s: the chart's rules differ from deploy/'s", role.Name)
		if !strings.Contains(role.Name, "metrics") {
			roles = append(roles, role.Name)
		}
	}
	require.ElementsMatch(t, tc.roles, roles)
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		for _, b := range objectsOf(objs, kind) {
			ref, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
			if !slices.Contains(tc.roles, ref) || strings.HasSuffix(b.GetName(), "-leases") {
				continue
			}
			if tc.bound == "" || ref == "clusterregistry-tunnel" { // reviews are not namespaced
				require.Equal(t, "ClusterRoleBinding", kind, "%s binds %s", b.GetName(), ref)
			} else {
				require.Equal(t, "RoleBinding", kind, "%s binds %s cluster-wide", b.GetName(), ref)
				require.Equal(t, tc.bound, b.GetNamespace())
			}
		}
	}

}

// requireControllers: the controllers' Deployment runs the image's command as its user, sharded
// or leader-elected as tc says.
func requireControllers(t *testing.T, objs []*unstructured.Unstructured, tc chartCase, want map[string]rbacv1.ClusterRole, ns string) {
	t.Helper()
	d := deploymentOf(t, objs, "-controllers")
	pod := d.Spec.Template.Spec
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.EqualValues(t, 65532, *pod.SecurityContext.RunAsUser, "the image's user (hack/image)")
	c := pod.Containers[0]
	require.Empty(t, c.Command, "the image's entrypoint is the command")
	require.Equal(t, "controllers", c.Args[0])
	if tc.sharded {
		require.Contains(t, c.Args, "--shard-group=controllers")
		roles := objectsOf(objs, "Role")
		require.Len(t, roles, 1, "a shard group's replicas need to list and collect Leases")
		var role rbacv1.ClusterRole
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(roles[0].Object, &role))
		require.Equal(t, want["Role/clusterregistry-controllers-shard"].Rules, role.Rules, "the shard Role's rules differ from deploy/controllers/shard-role.yaml's")
		require.True(t, strings.HasSuffix(c.Image, ":v9.9.9"), c.Image)
	} else {
		require.Contains(t, c.Args, "--leader-elect")
		require.True(t, strings.HasSuffix(c.Image, ":dev"), "the tag defaults to appVersion: %s", c.Image)
	}
	if tc.bound != "" {
		require.Contains(t, c.Args, "--namespace="+ns)
	} else {
		require.Contains(t, c.Args, "--all-namespaces")
	}

}

// requireFleetAPI: fleet-api runs, over TLS only, when tc says, and not otherwise.
func requireFleetAPI(t *testing.T, objs []*unstructured.Unstructured, tc chartCase) {
	t.Helper()
	if tc.fleetAPI {
		api := deploymentOf(t, objs, "-fleet-api").Spec.Template.Spec
		require.EqualValues(t, 65532, *api.SecurityContext.RunAsUser)
		args := api.Containers[0].Args
		require.Contains(t, args, "--tls-cert-file=/tls/tls.crt", "fleet-api serves other machines over TLS only")
		require.Contains(t, args, "--allowed-host=clusterregistry-fleet-api,clusterregistry-fleet-api."+releaseNamespace+",clusterregistry-fleet-api."+releaseNamespace+".svc,fleet.example.com")
		require.Contains(t, args, "--cors-allowed-origin=https://optikon.example.com:30800", "the Optikon UI's origin")
		require.Contains(t, args, "--all-namespaces")
		require.Contains(t, args, "--optikon-cluster-set=edge", "with every set served, /v0 serves the one named")
		require.Equal(t, "fleet-api-tls", api.Volumes[0].Secret.SecretName)
		if !tc.tunnel {
			require.Len(t, objectsOf(objs, "Service"), 1)
		}
	} else {
		for _, s := range objectsOf(objs, "Service") {
			require.Contains(t, s.GetName(), "-tunnel", "fleet-api is off by default")
		}
	}

}

// requireTunnel: with tc.tunnel, the tunnel server runs as its replicas' count says, with its
// certificates, behind a Service for readers and one for agents, and the controllers and
// fleet-api reach members through it with the reader's certificate; without, none of it.
func requireTunnel(t *testing.T, objs []*unstructured.Unstructured, tc chartCase) {
	t.Helper()
	readerFlags := []string{"--tunnel-server=clusterregistry-tunnel." + releaseNamespace + ".svc:8090",
		"--tunnel-ca=/tunnel/ca.crt", "--tunnel-cert=/tunnel/tls.crt", "--tunnel-key=/tunnel/tls.key"}
	readers := []appsv1.Deployment{deploymentOf(t, objs, "-controllers")}
	if tc.fleetAPI {
		readers = append(readers, deploymentOf(t, objs, "-fleet-api"))
	}
	if !tc.tunnel {
		for _, d := range objectsOf(objs, "Deployment") {
			require.NotEqual(t, "clusterregistry-tunnel", d.GetName(), "the tunnel server is off by default")
		}
		for _, d := range readers {
			require.NotContains(t, d.Spec.Template.Spec.Containers[0].Args, readerFlags[0])
		}
		return
	}
	server := deploymentOf(t, objs, "-tunnel")
	c := server.Spec.Template.Spec.Containers[0]
	require.Equal(t, "tunnel-server", c.Args[0])
	require.Contains(t, c.Args, "--server-count=2", "agents connect to both replicas")
	require.Contains(t, c.Args, "--reader-ca=/frontend/ca.crt")
	if tc.bound != "" {
		require.Contains(t, c.Args, "--namespace="+tc.bound, "the server admits its set's agents alone, as it may read their ServiceAccounts there alone")
	} else {
		require.Contains(t, c.Args, "--all-namespaces")
	}
	require.EqualValues(t, 2, *server.Spec.Replicas)
	require.Equal(t, "tunnel-frontend", server.Spec.Template.Spec.Volumes[0].Secret.SecretName)
	require.Equal(t, "tunnel-agents", server.Spec.Template.Spec.Volumes[1].Secret.SecretName)
	services := map[string]string{}
	for _, s := range objectsOf(objs, "Service") {
		typ, _, _ := unstructured.NestedString(s.Object, "spec", "type")
		services[s.GetName()] = typ
	}
	require.Contains(t, services, "clusterregistry-tunnel")
	require.Equal(t, "LoadBalancer", services["clusterregistry-tunnel-agents"], "agents dial in from outside the cluster")
	for _, d := range readers {
		pod := d.Spec.Template.Spec
		for _, f := range readerFlags {
			require.Contains(t, pod.Containers[0].Args, f, d.Name)
		}
		var secrets []string
		for _, v := range pod.Volumes {
			secrets = append(secrets, v.Secret.SecretName)
		}
		require.Contains(t, secrets, "tunnel-reader", "%s mounts the reader's certificate", d.Name)
	}
}

// requireRegistryTakes: the registry takes every object, in a server dry run.
func requireRegistryTakes(t *testing.T, ctx context.Context, objs []*unstructured.Unstructured, mapper meta.RESTMapper, dyn dynamic.Interface) {
	t.Helper()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s %s", gvk, o.GetName())
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := o.GetNamespace(); ns != "" {
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		_, err = ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "chart-test", DryRun: []string{metav1.DryRunAll}, Force: true})
		require.NoError(t, err, "%s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
	}
}

// deploy/controllers/deployment.yaml runs what the chart runs with its defaults: the image's
// entrypoint (hack/image's /usr/local/bin/clusterregistry, checked by hack/image's test) with the
// same arguments, as the image's numeric user. It ran command /clusterregistry, which the
// project's image does not have.
func TestPlainDeploymentIsTheCharts(t *testing.T) {
	data, err := os.ReadFile("controllers/deployment.yaml")
	require.NoError(t, err)
	plain := deploymentOf(t, decode(t, "controllers/deployment.yaml", string(data)), "-controllers")
	objs, err := render(t, nil)
	require.NoError(t, err)
	chart := deploymentOf(t, objs, "-controllers")
	require.Len(t, plain.Spec.Template.Spec.Containers, 1)
	got, want := plain.Spec.Template.Spec.Containers[0], chart.Spec.Template.Spec.Containers[0]
	require.Empty(t, got.Command, "the image's entrypoint is the command")
	require.Equal(t, want.Args, got.Args, "the plain Deployment's arguments are the chart's defaults'")
	require.Equal(t, chart.Spec.Template.Spec.SecurityContext, plain.Spec.Template.Spec.SecurityContext)
	require.Equal(t, want.SecurityContext, got.SecurityContext)
}

// The chart's version follows the module's: the last release's (hack/last-release) on its
// commit, the next minor's -dev after it on main, as RELEASE.md's steps say. It read 0.4.0-dev
// at v0.5.0.
func TestChartVersionIsTheModules(t *testing.T) {
	chrt, err := loader.Load("chart")
	require.NoError(t, err)
	last, err := os.ReadFile("../hack/last-release")
	require.NoError(t, err)
	release, _, _ := strings.Cut(strings.TrimSpace(string(last)), " ")
	var major, minor, patch int
	_, err = fmt.Sscanf(release, "v%d.%d.%d", &major, &minor, &patch)
	require.NoError(t, err, "hack/last-release: %q", last)
	next := fmt.Sprintf("%d.%d.0-dev", major, minor+1)
	require.Contains(t, []string{strings.TrimPrefix(release, "v"), next}, chrt.Metadata.Version,
		"deploy/chart/Chart.yaml's version: the last release's (%s), or %s after it (RELEASE.md)", release, next)
}

// Two releases of the chart coexist: every object that is not in the release's namespace (its
// ClusterRoles and their bindings) is named after the release, so that a second release, or one
// installed beside deploy/'s manifests, owns objects of its own (the fleet-api ClusterRole had
// a fixed name, and a second release failed: "exists and cannot be imported into the current
// release"). fleet-api's objects are labelled as fleet-api's.
func TestChartNamesItsObjectsAfterTheRelease(t *testing.T) {
	vals := map[string]any{"controllers": []any{"health", "rotation", "clusterprofiles", "placements", "releases"},
		"fleetAPI": map[string]any{"enabled": true, "optikonClusterSet": "edge", "tls": map[string]any{"secretName": "fleet-api-tls"}}}
	names := map[string]string{}
	for _, release := range []string{"first", "second"} {
		objs, err := renderAs(t, release, vals)
		require.NoError(t, err)
		for _, o := range objs {
			if o.GetNamespace() != "" && o.GetNamespace() != releaseNamespace {
				continue
			}
			if o.GetNamespace() == "" {
				require.True(t, strings.HasPrefix(o.GetName(), release+"-"), "%s %s is not named after release %s", o.GetKind(), o.GetName(), release)
			}
			key := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
			require.NotContains(t, names, key, "releases %s and %s both make %s", names[key], release, key)
			names[key] = release
			if strings.Contains(o.GetName(), "fleet-api") {
				require.Equal(t, "fleet-api", o.GetLabels()["app.kubernetes.io/name"], "%s %s", o.GetKind(), o.GetName())
			}
		}
	}
}

// The chart's values schema (values.schema.json) refuses what the templates refuse, so that helm
// lint and helm install refuse it too, naming the value, not only helm template: fleet-api
// without its TLS Secret (helm lint --set fleetAPI.enabled=true passed), a controller that is
// none, a misspelt key, a value of the wrong type. What the chart's tests install passes.
func TestChartValuesSchema(t *testing.T) {
	chrt, err := loader.Load("chart")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string // in the error; "" for none
	}{
		{"defaults", nil, ""},
		{"fleet-api with TLS", map[string]any{"fleetAPI": map[string]any{"enabled": true, "optikonClusterSet": "edge", "tls": map[string]any{"secretName": "fleet-api-tls"}}}, ""},
		{"fleet-api of one set", map[string]any{"clusterSet": "edge", "fleetAPI": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "fleet-api-tls"}}}, ""},
		// Every set served, and /v0 none: its every call answered 400.
		{"fleet-api of every set without Optikon's", map[string]any{"fleetAPI": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "fleet-api-tls"}}}, "/fleetAPI"},
		{"sharded, one set", map[string]any{"clusterSet": "fleet", "sharding": map[string]any{"enabled": true}, "controllers": []any{"health", "releases"}}, ""},
		{"fleet-api without TLS", map[string]any{"fleetAPI": map[string]any{"enabled": true}}, "/fleetAPI/tls/secretName"},
		{"no such controller", map[string]any{"controllers": []any{"health", "nosuch"}}, "/controllers/1"},
		{"a misspelt key", map[string]any{"fleetApi": map[string]any{"enabled": true}}, "fleetApi"},
		{"replicas as words", map[string]any{"replicas": "two"}, "/replicas"},
		{"the tunnel server with its Secrets", map[string]any{"tunnel": map[string]any{"enabled": true, "frontendSecretName": "f", "agentSecretName": "a", "readerSecretName": "r"}}, ""},
		{"the tunnel server without its readers' Secret", map[string]any{"tunnel": map[string]any{"enabled": true, "frontendSecretName": "f", "agentSecretName": "a"}}, "/tunnel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := chartutil.CoalesceValues(chrt, tc.values)
			require.NoError(t, err)
			err = chartutil.ValidateAgainstSchema(chrt, vals)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err, "the schema took it")
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// Every value of values.yaml is in docs/controllers.md's table of the chart's values: the chart
// had no values reference anywhere.
func TestChartValuesAreDocumented(t *testing.T) {
	chrt, err := loader.Load("chart")
	require.NoError(t, err)
	docs, err := os.ReadFile("../docs/controllers.md")
	require.NoError(t, err)
	var walk func(prefix string, values map[string]any)
	walk = func(prefix string, values map[string]any) {
		for key, v := range values {
			path := prefix + key
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && path != "resources" && path != "fleetAPI.resources" && path != "tunnel.resources" {
				walk(path+".", sub)
				continue
			}
			require.Contains(t, string(docs), "`"+path+"`", "docs/controllers.md does not document the chart's value %s", path)
		}
	}
	walk("", chrt.Values)
}
