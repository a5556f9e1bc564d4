package chartrender_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/chartrender"
)

// A chart packaged without helm, as README says (tar czf of the chart's directory), loads as the
// one helm package makes: a user without the helm binary can put a chart in a ConfigMap.
func TestChartPackagedWithTar(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"shop/Chart.yaml":                "apiVersion: v2\nname: shop\nversion: 1.2.3\n",
		"shop/values.yaml":               "replicas: 1\n",
		"shop/templates/configmap.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-config}\ndata: {replicas: \"{{ .Values.replicas }}\"}\n",
		"shop/templates/_helpers.tpl":    "{{- define \"shop.name\" -}}shop{{- end -}}\n",
		"shop/charts/.keep":              "",
		"shop/templates/NOTES.txt":       "installed\n",
		"shop/templates/service.yaml":    "apiVersion: v1\nkind: Service\nmetadata: {name: {{ include \"shop.name\" . }}}\nspec: {ports: [{port: 80}]}\n",
		"shop/.helmignore":               "*.swp\n",
		"shop/templates/tests/test.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: t, annotations: {helm.sh/hook: test}}\nspec: {containers: [{name: t, image: busybox}]}\n",
	}
	for name, content := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	cmd := exec.Command("tar", "czf", "shop-1.2.3.tgz", "shop")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	archive, err := os.ReadFile(filepath.Join(dir, "shop-1.2.3.tgz"))
	require.NoError(t, err)
	c, err := chartrender.Load(archive)
	require.NoError(t, err)
	require.Equal(t, "shop", c.Name())
	require.Equal(t, "1.2.3", c.Version())
}
