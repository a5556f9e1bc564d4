package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/placement"
)

// A Release's spec.overrides patch its rendered objects on the members they choose. A member's
// revision is the Release's, or, when overrides choose it, a hash of the Release's and theirs:
// an override's change is a new revision on its members only, so only they are applied again.
// The plan compares each member with the revision it should run (see viewOf).

// OverrideError is an override whose patch does not apply to an object it targets (or does not
// parse): the Release stalls, InvalidOverride.
type OverrideError struct {
	// Where names the override and its patch: spec.overrides[0] (eu), patches[1].
	Where string
	// Object is the object the patch was applied to, if it got that far.
	Object string
	Err    error
}

func (e *OverrideError) Error() string {
	if e.Object != "" {
		return fmt.Sprintf("%s on %s: %v", e.Where, e.Object, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Where, e.Err)
}
func (e *OverrideError) Unwrap() error { return e.Err }

// override is one spec.overrides entry, compiled.
type override struct {
	name     string
	selector labels.Selector // nil chooses every member
	cel      *placement.ClusterExpression
	patches  []patch
	// sum is a hash of the override as written: it makes the revision of the members it chooses.
	sum string
}

type patch struct {
	where string
	gk    schema.GroupKind
	name  string
	typ   v1alpha1.ReleasePatchType
	data  []byte // JSON
}

// compileOverrides parses rel's spec.overrides.
func compileOverrides(rel *v1alpha1.Release) ([]override, error) {
	var out []override
	for i, o := range rel.Spec.Overrides {
		where := fmt.Sprintf("spec.overrides[%d] (%s)", i, o.Name)
		ov := override{name: o.Name}
		if o.ClusterSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(o.ClusterSelector)
			if err != nil {
				return nil, &OverrideError{Where: where + ".clusterSelector", Err: err}
			}
			ov.selector = sel
		}
		if o.CEL != "" {
			expr, err := placement.CompileClusterExpression(o.CEL)
			if err != nil {
				return nil, &OverrideError{Where: where + ".cel", Err: err}
			}
			ov.cel = expr
		}
		for j, p := range o.Patches {
			data, err := yaml.YAMLToJSON([]byte(p.Patch))
			if err != nil {
				return nil, &OverrideError{Where: fmt.Sprintf("%s, patches[%d]", where, j), Err: err}
			}
			ov.patches = append(ov.patches, patch{where: fmt.Sprintf("%s, patches[%d]", where, j), gk: schema.GroupKind{Group: p.Group, Kind: p.Kind},
				name: p.Name, typ: p.Type, data: data})
		}
		raw, _ := json.Marshal(o)
		sum := sha256.Sum256(raw)
		ov.sum = hex.EncodeToString(sum[:])
		out = append(out, ov)
	}
	return out, nil
}

// chosen are the overrides that choose cluster; none for a nil cluster.
func chosen(overrides []override, cluster *v1alpha1.Cluster) []override {
	var out []override
	for _, o := range overrides {
		if cluster != nil && o.chooses(cluster) {
			out = append(out, o)
		}
	}
	return out
}

// chooses: the override's selector and cel both keep cluster.
func (o override) chooses(cluster *v1alpha1.Cluster) bool {
	if o.selector != nil && !o.selector.Matches(labels.Set(cluster.Labels)) {
		return false
	}
	if o.cel != nil {
		ok, err := o.cel.Matches(cluster)
		return err == nil && ok
	}
	return true
}

// memberRevision is the revision of a member that overrides choose: the Release's, a dash, and
// a hash of the overrides. It begins with the Release's, so that a replica that does not know a
// member's Cluster (sharded: another replica's member) still knows which revision it is of
// (atRevision).
func memberRevision(revision string, overrides []override) string {
	if len(overrides) == 0 {
		return revision
	}
	h := sha256.New()
	for _, o := range overrides {
		h.Write([]byte(o.sum))
		h.Write([]byte{0})
	}
	return revision + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// ofRevision: member revision r is of the Release's revision (with or without overrides).
func ofRevision(r, revision string) bool {
	return r == revision || (revision != "" && strings.HasPrefix(r, revision+"-"))
}

// applyOverrides are objs with overrides' patches applied, in order; objs are not changed.
func applyOverrides(objs []*unstructured.Unstructured, overrides []override) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, u := range objs {
		out[i] = u.DeepCopy()
		for _, o := range overrides {
			for _, p := range o.patches {
				if !p.targets(u) {
					continue
				}
				if err := p.apply(out[i]); err != nil {
					return nil, &OverrideError{Where: p.where, Object: describe(u, ref{}), Err: err}
				}
			}
		}
	}
	return out, nil
}

// apply patches u in place.
func (p patch) apply(u *unstructured.Unstructured) error {
	doc, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	var patched []byte
	switch p.typ {
	case v1alpha1.PatchJSON:
		ops, err := jsonpatch.DecodePatch(p.data)
		if err != nil {
			return err
		}
		patched, err = ops.Apply(doc)
		if err != nil {
			return err
		}
	case v1alpha1.PatchMerge:
		if patched, err = jsonpatch.MergePatch(doc, p.data); err != nil {
			return err
		}
	default: // StrategicMerge: the built-in kinds' merge keys; a JSON merge patch for others
		typed, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			if patched, err = jsonpatch.MergePatch(doc, p.data); err != nil {
				return err
			}
			break
		}
		if patched, err = strategicpatch.StrategicMergePatch(doc, p.data, typed); err != nil {
			return err
		}
	}
	var obj map[string]any
	if err := json.Unmarshal(patched, &obj); err != nil {
		return err
	}
	u.Object = obj
	return nil
}

// revisionFor is the revision of the member of cluster: the Bundle's, or with the overrides that
// choose it.
func (b *Bundle) revisionFor(cluster *v1alpha1.Cluster) string {
	return memberRevision(b.Revision, b.overridesFor(cluster))
}

// withOverrides compiles rel's overrides into b, and checks each against b's objects as rendered
// with the Release's values alone.
func (b *Bundle) withOverrides(rel *v1alpha1.Release) error {
	if len(rel.Spec.Overrides) == 0 {
		return nil
	}
	if b.chart != nil && b.chart.helm {
		return &OverrideError{Where: "spec.overrides", Err: errors.New("a chart in Helm mode is applied by Helm: overrides patch what the Release renders (manifests, or a chart in Render mode)")}
	}
	var err error
	if b.overrides, err = compileOverrides(rel); err != nil {
		return err
	}
	if b.chart == nil || len(rel.Spec.Source.Chart.MemberValues) == 0 {
		// The objects are the same for every member: a patch that targets none of them is a typo
		// that would quietly never patch anything. (A chart's objects may differ by member.)
		if err := untargeted(b.Objects, b.overrides); err != nil {
			return err
		}
	}
	_, err = applyOverrides(b.Objects, b.overrides)
	return err
}

// untargeted is the error of the first patch that targets none of objs, naming what it targets
// and what there is.
func untargeted(objs []*unstructured.Unstructured, overrides []override) error {
	for _, o := range overrides {
		for _, p := range o.patches {
			if slices.ContainsFunc(objs, p.targets) {
				continue
			}
			what := p.gk.Kind
			if p.gk.Group != "" {
				what += "." + p.gk.Group
			}
			if p.name != "" {
				what += " " + p.name
			}
			var have []string
			for _, u := range objs {
				if u.GroupVersionKind().GroupKind() == p.gk {
					have = append(have, u.GetName())
				}
			}
			there := "it has no " + p.gk.Kind
			if len(have) > 0 {
				there = fmt.Sprintf("its %s objects are %s", p.gk.Kind, strings.Join(have, ", "))
			}
			return &OverrideError{Where: p.where, Err: fmt.Errorf("targets %s, which the Release does not have (%s): check the kind, group and name", what, there)}
		}
	}
	return nil
}

// targets: the patch applies to u.
func (p patch) targets(u *unstructured.Unstructured) bool {
	return p.gk == u.GroupVersionKind().GroupKind() && (p.name == "" || p.name == u.GetName())
}
