package chartrender

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"helm.sh/helm/v4/pkg/chart/common"
	valuesutil "helm.sh/helm/v4/pkg/chart/common/util"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Input is what one render takes. Members whose inputs are equal share a render.
type Input struct {
	Chart *Chart
	// Values are the chart's values for this member: the Release's, with whatever it takes from
	// the member merged in by the caller (only what the chart is given makes renders distinct).
	Values map[string]any
	// ReleaseName and Namespace are .Release.Name and .Release.Namespace.
	ReleaseName, Namespace string
	// KubeVersion is the member's (.Capabilities.KubeVersion), such as "v1.32.3"; Helm's
	// default when empty.
	KubeVersion string
	// APIVersions are the member's API versions beyond Helm's defaults
	// (.Capabilities.APIVersions), such as "monitoring.coreos.com/v1".
	APIVersions []string
}

// Options configure a Renderer.
type Options struct {
	// Keep is how many distinct renders are kept for later asks; 256 when zero.
	Keep int
	// Timeout bounds one render's time; DefaultTimeout when zero. See LimitError.
	Timeout time.Duration
	// MaxBytes bounds what one render makes: all its files together, and each list or string
	// that a size-taking template function (until, repeat, indent...) would make;
	// DefaultMaxBytes when zero.
	MaxBytes int64
}

// Renderer renders charts, once per distinct Input (see the package's doc). It is safe for
// concurrent use.
type Renderer struct {
	keep     int
	timeout  time.Duration
	maxBytes int64
	group    singleflight.Group
	renders  atomic.Int64

	mu    sync.Mutex
	kept  map[string]*rendered
	order []string // oldest first
}

type rendered struct {
	objects []*unstructured.Unstructured
	err     error
}

// NewRenderer returns a Renderer.
func NewRenderer(opts Options) *Renderer {
	if opts.Keep <= 0 {
		opts.Keep = 256
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	return &Renderer{keep: opts.Keep, timeout: opts.Timeout, maxBytes: opts.MaxBytes, kept: map[string]*rendered{}}
}

// Renders is how many times the Renderer ran Helm's engine.
func (r *Renderer) Renders() int64 { return r.renders.Load() }

// Render renders in: the chart's CRDs (crds/), then its objects in Helm's install order, as
// `helm template --include-crds` prints them, each a copy of the caller's own. A chart with
// hooks is a *HookError; one over the Renderer's bounds, a *LimitError.
func (r *Renderer) Render(in Input) ([]*unstructured.Unstructured, error) {
	if in.Chart == nil {
		return nil, errors.New("chartrender: Input.Chart is required")
	}
	key, err := inputKey(in)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	got := r.kept[key]
	r.mu.Unlock()
	if got == nil {
		v, _, _ := r.group.Do(key, func() (any, error) {
			// A flight that ended between the look above and this one kept its render.
			r.mu.Lock()
			kept := r.kept[key]
			r.mu.Unlock()
			if kept != nil {
				return kept, nil
			}
			r.renders.Add(1)
			objs, err := r.bounded(in)
			out := &rendered{objects: objs, err: err}
			r.remember(key, out)
			return out, nil
		})
		got = v.(*rendered)
	}
	if got.err != nil {
		return nil, got.err
	}
	out := make([]*unstructured.Unstructured, len(got.objects))
	for i, o := range got.objects {
		out[i] = o.DeepCopy()
	}
	return out, nil
}

func (r *Renderer) remember(key string, v *rendered) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.kept[key]; ok {
		return
	}
	r.kept[key] = v
	r.order = append(r.order, key)
	for len(r.order) > r.keep {
		delete(r.kept, r.order[0])
		r.order = r.order[1:]
	}
}

// inputKey names an Input by what changes its render: encoding/json writes map keys sorted, so
// equal values give equal keys.
func inputKey(in Input) (string, error) {
	apis := slices.Clone(in.APIVersions)
	slices.Sort(apis)
	b, err := json.Marshal([]any{in.Chart.Digest, in.Values, in.ReleaseName, in.Namespace, in.KubeVersion, apis})
	if err != nil {
		return "", fmt.Errorf("chartrender: the values cannot be encoded: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// bounded renders in within the Renderer's bounds (see budget): it gives up waiting once the
// render's time is up.
func (r *Renderer) bounded(in Input) ([]*unstructured.Unstructured, error) {
	b := &budget{chart: in.Chart.Name(), maxBytes: r.maxBytes}
	type result struct {
		objs []*unstructured.Unstructured
		err  error
	}
	done := make(chan result, 1)
	go func() {
		objs, err := render(in, b)
		if met := b.met(); met != nil {
			// Helm's engine rewrites template errors as text; the bound met is what to say.
			objs, err = nil, met
		}
		done <- result{objs, err}
	}()
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	select {
	case res := <-done:
		return res.objs, res.err
	case <-timer.C:
		err := b.exceed(fmt.Sprintf("took longer than %s", r.timeout))
		b.expired.Store(true)
		return nil, err
	}
}

func render(in Input, b *budget) ([]*unstructured.Unstructured, error) {
	c, err := in.Chart.load()
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", in.Chart.Name(), err)
	}
	caps := common.DefaultCapabilities.Copy()
	if in.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(in.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("the member's Kubernetes version %q: %w", in.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	caps.APIVersions = append(caps.APIVersions, in.APIVersions...)
	if c.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(c.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart %s requires kubeVersion %s, which Kubernetes %s is not", c.Metadata.Name, c.Metadata.KubeVersion, caps.KubeVersion.Version)
	}
	// Subcharts' conditions and tags, and imported values, as helm install processes them.
	if err := chartutil.ProcessDependencies(c, in.Values); err != nil {
		return nil, fmt.Errorf("chart %s: its dependencies: %w", c.Metadata.Name, err)
	}
	values, err := valuesutil.ToRenderValuesWithSchemaValidation(c, in.Values,
		common.ReleaseOptions{Name: in.ReleaseName, Namespace: in.Namespace, Revision: 1, IsInstall: true}, caps, false)
	if err != nil {
		return nil, fmt.Errorf("chart %s: the values: %w", c.Metadata.Name, err)
	}
	// Without a client: `lookup` finds nothing and DNS functions are off, as in helm template.
	// The context reaches only lookups, which there are none of.
	e := engine.Engine{CustomTemplateFuncs: b.funcs()}
	files, err := e.RenderWithContext(context.Background(), c, values)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", c.Metadata.Name, err)
	}
	var size int64
	for _, f := range files {
		size += int64(len(f))
	}
	if size > b.maxBytes {
		return nil, b.exceed(fmt.Sprintf("made %s of files, over %s", bytesText(size), bytesText(b.maxBytes)))
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", c.Metadata.Name, err)
	}
	var refused []Hook
	for _, h := range hooks {
		if slices.ContainsFunc(h.Events, func(e release.HookEvent) bool { return e != release.HookTest }) {
			events := make([]string, len(h.Events))
			for i, e := range h.Events {
				events[i] = string(e)
			}
			refused = append(refused, Hook{Template: h.Path, Kind: h.Kind, Name: h.Name, Events: events})
		}
	}
	if len(refused) > 0 {
		return nil, &HookError{Chart: c.Metadata.Name, Hooks: refused}
	}
	var out []*unstructured.Unstructured
	for _, crd := range c.CRDObjects() {
		objs, err := decode(crd.Filename, crd.File.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	for _, m := range manifests {
		objs, err := decode(m.Name, []byte(m.Content))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// decode reads the objects of a rendered file, naming the file when one is not an object.
func decode(file string, data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(string(data))))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s, document %d: not YAML: %w", path.Clean(file), i+1, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s, document %d: not an object (no apiVersion or kind)", path.Clean(file), i+1)
		}
		out = append(out, u)
	}
}
