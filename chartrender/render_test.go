package chartrender_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cluster-registry/sdk/chartrender"
)

// packaged is Package, failing the test on an error.
func packaged(t testing.TB, dir string, files map[string]string) []byte {
	t.Helper()
	b, err := chartrender.Package(dir, files)
	require.NoError(t, err)
	return b
}

// webChart uses what charts use: values, the release, the member's Kubernetes version and API
// versions, a helper, a subchart behind a condition, a CRD, notes and a test hook.
func webChart(t testing.TB) []byte {
	return packaged(t, "web", map[string]string{
		"Chart.yaml": `apiVersion: v2
name: web
version: 1.2.3
appVersion: "1.0"
dependencies:
- name: sub
  version: 0.1.0
  condition: sub.enabled
`,
		"values.yaml":            "replicas: 1\nregion: none\nimage: registry.invalid/web:1\nsub:\n  enabled: false\n",
		"templates/_helpers.tpl": `{{- define "web.name" -}}{{ .Release.Name }}-web{{- end -}}`,
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "web.name" . }}
  namespace: {{ .Release.Namespace }}
  labels: {region: {{ .Values.region | quote }}}
  annotations: {kube: {{ .Capabilities.KubeVersion.Version | quote }}}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: {{ .Values.image | quote }}}]
`,
		"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ include "web.name" . }}}
data: {region: {{ .Values.region | quote }}}
---
apiVersion: v1
kind: Service
metadata: {name: {{ include "web.name" . }}}
spec: {selector: {app: web}, ports: [{port: 80}]}
`,
		"templates/monitor.yaml": `{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: {{ include "web.name" . }}}
spec: {selector: {matchLabels: {app: web}}, endpoints: [{port: http}]}
{{- end }}
`,
		"templates/NOTES.txt": "Thanks for installing {{ .Release.Name }}.\n",
		"templates/tests/ping.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: {{ include "web.name" . }}-ping
  annotations: {helm.sh/hook: test}
spec: {restartPolicy: Never, containers: [{name: ping, image: registry.invalid/curl:1}]}
`,
		"crds/crontabs.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.example.com}
spec:
  group: example.com
  names: {kind: CronTab, plural: crontabs}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`,
		"charts/sub/Chart.yaml":        "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"charts/sub/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub-{{ .Release.Name }}}\ndata: {from: sub}\n",
		"charts/sub/values.yaml":       "{}\n",
	})
}

// helmTemplate is what `helm template --include-crds` prints for the same input: Helm's own
// install action, client-only.
func helmTemplate(t testing.TB, archive []byte, in chartrender.Input) []*unstructured.Unstructured {
	t.Helper()
	c, err := loader.LoadArchive(bytes.NewReader(archive))
	require.NoError(t, err)
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName, install.Namespace = in.ReleaseName, in.Namespace
	if in.KubeVersion != "" {
		install.KubeVersion, err = common.ParseKubeVersion(in.KubeVersion)
		require.NoError(t, err)
	}
	install.APIVersions = in.APIVersions
	rel, err := install.Run(c, in.Values)
	require.NoError(t, err)
	r, ok := rel.(*release.Release)
	require.True(t, ok, "%T", rel)
	return decodeAll(t, r.Manifest)
}

func decodeAll(t testing.TB, stream string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(stream, "\n---\n") {
		objs, err := chartrender.DecodeForTest(doc)
		require.NoError(t, err)
		out = append(out, objs...)
	}
	return out
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

// What render mode applies is what helm template renders, for every combination of values,
// Kubernetes version and API versions: the same objects, in the same order, equal field for
// field; the chart's CRDs first; no notes, no test hook.
func TestParityWithHelmTemplate(t *testing.T) {
	archive := webChart(t)
	c, err := chartrender.Load(archive)
	require.NoError(t, err)
	require.Equal(t, "web", c.Name())
	require.Equal(t, "1.2.3", c.Version())
	require.True(t, strings.HasPrefix(c.Digest, "sha256:"))
	r := chartrender.NewRenderer(chartrender.Options{})
	for _, values := range []map[string]any{
		nil,
		{"region": "eu-west", "replicas": 3, "sub": map[string]any{"enabled": true}},
	} {
		for _, kube := range []string{"v1.32.13", "v1.36.3"} {
			for _, apis := range [][]string{nil, {"monitoring.coreos.com/v1"}} {
				in := chartrender.Input{Chart: c, Values: values, ReleaseName: "shop", Namespace: "apps", KubeVersion: kube, APIVersions: apis}
				t.Run(fmt.Sprintf("%v/%s/%v", values, kube, apis), func(t *testing.T) {
					got, err := r.Render(in)
					require.NoError(t, err)
					want := helmTemplate(t, archive, in)
					require.Equal(t, names(want), names(got))
					for i := range want {
						require.Equal(t, want[i].Object, got[i].Object, "%s", names(want)[i])
					}
					require.Equal(t, "CustomResourceDefinition", got[0].GetKind(), "CRDs come first")
					require.NotContains(t, names(got), "Pod/shop-web-ping", "a test hook is not installed")
					require.Equal(t, values != nil, contains(names(got), "ConfigMap/sub-shop"), "the subchart follows its condition")
					require.Equal(t, apis != nil, contains(names(got), "ServiceMonitor/shop-web"), "the API versions reach the chart")
				})
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A chart with hooks is refused, naming each hook's template and events; its test hooks alone
// would not be.
func TestHooksAreRefusedNamingThem(t *testing.T) {
	archive := packaged(t, "migrating", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: migrating\nversion: 0.1.0\n",
		"templates/migrate.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {helm.sh/hook: "pre-install,pre-upgrade"}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: registry.invalid/m:1}]}}}
`,
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n",
	})
	c, err := chartrender.Load(archive)
	require.NoError(t, err)
	_, err = chartrender.NewRenderer(chartrender.Options{}).Render(chartrender.Input{Chart: c, ReleaseName: "m", Namespace: "apps"})
	var hooks *chartrender.HookError
	require.True(t, errors.As(err, &hooks), "%v", err)
	require.Len(t, hooks.Hooks, 1)
	require.Equal(t, "migrating/templates/migrate.yaml", hooks.Hooks[0].Template)
	require.Equal(t, []string{"pre-install", "pre-upgrade"}, hooks.Hooks[0].Events)
	require.ErrorContains(t, err, "migrating/templates/migrate.yaml (Job migrate, on pre-install,pre-upgrade)")
	require.ErrorContains(t, err, "Helm mode")
}

// A thousand members over three regions, asking at once: three renders, and each member's
// objects its own to change.
func TestOneRenderPerDistinctInput(t *testing.T) {
	c, err := chartrender.Load(webChart(t))
	require.NoError(t, err)
	r := chartrender.NewRenderer(chartrender.Options{})
	regions := []string{"eu", "us", "ap"}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for i := range 1000 {
		wg.Go(func() {
			objs, err := r.Render(chartrender.Input{Chart: c, Values: map[string]any{"region": regions[i%3]}, ReleaseName: "shop", Namespace: "apps", KubeVersion: "v1.36.3"})
			if err != nil {
				errs <- err
				return
			}
			objs[1].SetName("changed-by-member-" + fmt.Sprint(i)) // the caller's own copy
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, r.Renders())
	objs, err := r.Render(chartrender.Input{Chart: c, Values: map[string]any{"region": "eu"}, ReleaseName: "shop", Namespace: "apps", KubeVersion: "v1.36.3"})
	require.NoError(t, err)
	require.NotContains(t, objs[1].GetName(), "changed-by-member", "a caller's change reached the kept render")
	require.EqualValues(t, 3, r.Renders())
}

// A chart too large, as given or unpacked (a small archive of a large file), or not a packaged
// chart, is refused saying why.
func TestLoadRefusesWhatItCannotHold(t *testing.T) {
	_, err := chartrender.Load(bytes.Repeat([]byte{1}, chartrender.MaxArchiveBytes+1))
	require.ErrorIs(t, err, chartrender.ErrTooLarge)
	bomb := packaged(t, "bomb", map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: bomb\nversion: 0.1.0\n",
		"templates/zero.yaml": strings.Repeat("#", chartrender.MaxUnpackedBytes+1),
	})
	require.Less(t, len(bomb), 1<<20, "the archive is small")
	_, err = chartrender.Load(bomb)
	require.ErrorIs(t, err, chartrender.ErrTooLarge)
	require.ErrorContains(t, err, "unpacks to more than")
	_, err = chartrender.Load([]byte("apiVersion: v2\nname: plain-yaml\n"))
	require.ErrorContains(t, err, "not a packaged chart")
}

// Package is deterministic: the same files give the same archive, so the same digest.
func TestPackageIsDeterministic(t *testing.T) {
	var digests []string
	for range 3 {
		c, err := chartrender.Load(webChart(t))
		require.NoError(t, err)
		digests = append(digests, c.Digest)
	}
	require.Equal(t, digests[0], digests[1])
	require.Equal(t, digests[0], digests[2])
}
