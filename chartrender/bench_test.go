package chartrender_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/chartrender"
)

// BenchmarkRender is a render through a Renderer, its bounds included (every sprig function a
// template calls checks the render's budget), beside Helm's own template action (helm template)
// on the same chart and values, in turn in the same run: the time of each per render, and their
// ratio. The chart loops 2,000 times through until, printf, upper and quote; the values differ at
// each render, so the Renderer keeps nothing.
func BenchmarkRender(b *testing.B) {
	archive := packaged(b, "loop", map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: loop\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: loop}\ndata:\n" +
			"{{- range $i := until 2000 }}\n  k{{ $i }}: {{ printf \"%d-%s\" $i $.Values.r | upper | quote }}\n{{- end }}\n",
	})
	c, err := chartrender.Load(archive)
	require.NoError(b, err)
	r := chartrender.NewRenderer(chartrender.Options{Keep: 1})
	var ours, helms time.Duration
	for i := 0; b.Loop(); i++ {
		in := chartrender.Input{Chart: c, Values: map[string]any{"r": fmt.Sprint(i)}, ReleaseName: "loop", Namespace: "apps"}
		start := time.Now()
		objs, err := r.Render(in)
		ours += time.Since(start)
		require.NoError(b, err)
		start = time.Now()
		theirs := helmTemplate(b, archive, in)
		helms += time.Since(start)
		require.Len(b, theirs, len(objs))
	}
	b.ReportMetric(float64(ours.Microseconds())/float64(b.N), "µs/render")
	b.ReportMetric(float64(helms.Microseconds())/float64(b.N), "helm-µs/render")
	b.ReportMetric(float64(ours)/float64(helms), "chartrender/helm")
}
