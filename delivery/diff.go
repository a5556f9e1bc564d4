package delivery

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// ObjectDiff is what delivering one of a Release's objects to a member would change there.
type ObjectDiff struct {
	// Object names it: GROUP/VERSION KIND NAMESPACE/NAME, in kubectl diff's file-name form
	// (apps.v1.Deployment.shop.web).
	Object string
	// Live and Merged are the object as it runs on the member and as it would after the apply,
	// as YAML without managed fields, a Secret's values masked as kubectl diff masks them. Live
	// is empty for an object the apply would create, Merged for one the revision no longer has
	// (pruned).
	Live, Merged string
	// Err is why the member refused the dry run (a field another writer owns, an invalid
	// object, a kind it does not serve), in its words.
	Err string
}

// Changed: delivering the object would change something, or the member refuses it.
func (d ObjectDiff) Changed() bool { return d.Live != d.Merged || d.Err != "" }

// Diff is what delivering revision b of rel to a member would change, object by object: each
// object dry-run applied there with server-side apply as the releases controller applies it (the
// Release's field manager under prefix, ControllerOptions.FieldManager's, "" for its default;
// forced only where the object is already the Release's), beside what runs there; then each
// object the member has of the Release's (current, as its status names them) that b no longer
// has, which the apply would prune. Nothing is written.
func Diff(ctx context.Context, rel *v1alpha1.Release, b *Bundle, cluster *v1alpha1.Cluster, cfg *rest.Config, prefix string, current []v1alpha1.ReleaseObjectStatus) ([]ObjectDiff, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mc := &memberClients{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
	objs, err := b.objectsFor(cluster)
	if err != nil {
		return nil, err
	}
	manager := fieldManagerFor(cmp.Or(prefix, "clusterregistry-release"), rel.Namespace, rel.Name)
	out, missing, err := mc.namespaceToCreate(ctx, rel)
	if err != nil {
		return nil, err
	}
	seen := map[ref]bool{}
	for _, u := range objs {
		d, r := mc.diffOne(ctx, rel, u, manager, missing)
		seen[r] = true
		out = append(out, d)
	}
	for _, o := range current {
		if r := refOf(o); !seen[r] {
			live, err := mc.get(ctx, r)
			if err == nil && live != nil && ownedBy(live, rel) {
				out = append(out, ObjectDiff{Object: fileName(r), Live: asYAML(live)})
			}
		}
	}
	return out, nil
}

// namespaceToCreate is, for a Release with createNamespace whose target namespace the member
// lacks, the diff of making it, and its name: the apply would make it first. A dry run cannot
// apply into a namespace that does not exist yet, so the objects bound for it show as they would
// be created (diffOne).
func (mc *memberClients) namespaceToCreate(ctx context.Context, rel *v1alpha1.Release) ([]ObjectDiff, string, error) {
	if !rel.Spec.CreateNamespace {
		return nil, "", nil
	}
	name := rel.TargetNamespaceOrDefault()
	_, err := mc.dyn.Resource(namespaceGVR).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return nil, "", nil
	case !apierrors.IsNotFound(err):
		return nil, "", fmt.Errorf("reading namespace %s (spec.createNamespace): %w", name, err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "annotations": map[string]any{CreatedByAnnotation: rel.Namespace + "/" + rel.Name}}}}
	r := ref{GVR: namespaceGVR, Kind: "Namespace", Name: name}
	return []ObjectDiff{{Object: fileName(r), Merged: asYAML(ns)}}, name, nil
}

// diffOne dry-runs one object's apply; an object bound for missing, a namespace the apply would
// make first, shows as it would be created.
func (mc *memberClients) diffOne(ctx context.Context, rel *v1alpha1.Release, u *unstructured.Unstructured, manager, missing string) (ObjectDiff, ref) {
	gvk := u.GroupVersionKind()
	m, err := mc.mapping(gvk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			err = &notServedError{gvk: gvk}
		}
		r := ref{Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
		r.GVR.Group, r.GVR.Version = gvk.Group, gvk.Version
		return ObjectDiff{Object: fileName(r), Err: message(err)}, r
	}
	obj := u.DeepCopy()
	if m.Scope.Name() == meta.RESTScopeNameNamespace && obj.GetNamespace() == "" {
		obj.SetNamespace(rel.TargetNamespaceOrDefault())
	} else if m.Scope.Name() != meta.RESTScopeNameNamespace {
		obj.SetNamespace("")
	}
	r := ref{GVR: m.Resource, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	d := ObjectDiff{Object: fileName(r)}
	if missing != "" && r.Namespace == missing {
		_, d.Merged = maskSecret(nil, "", obj, asYAML(obj))
		return d, r
	}
	live, err := mc.get(ctx, r)
	if err != nil {
		d.Err = message(err)
		return d, r
	}
	if live != nil {
		d.Live = asYAML(live)
	}
	merged, err := mc.resource(r).Apply(ctx, r.Name, obj, metav1.ApplyOptions{FieldManager: manager,
		Force: live != nil && ownedBy(live, rel), DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		d.Err = message(err)
		return d, r
	}
	d.Merged = asYAML(merged)
	if live != nil && d.Live != "" {
		d.Live, d.Merged = maskSecret(live, d.Live, merged, d.Merged)
	} else {
		_, d.Merged = maskSecret(nil, "", merged, d.Merged)
	}
	return d, r
}

// resource is the dynamic client of r's resource, in its namespace.
func (mc *memberClients) resource(r ref) dynamic.ResourceInterface {
	if r.Namespace != "" {
		return mc.dyn.Resource(r.GVR).Namespace(r.Namespace)
	}
	return mc.dyn.Resource(r.GVR)
}

// get is the object r names on the member, nil when there is none.
func (mc *memberClients) get(ctx context.Context, r ref) (*unstructured.Unstructured, error) {
	live, err := mc.resource(r).Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return live, err
}

// ownedBy: the object carries rel's labels.
func ownedBy(u *unstructured.Unstructured, rel *v1alpha1.Release) bool {
	l := u.GetLabels()
	return l[v1alpha1.ReleaseLabel] == rel.Name && l[v1alpha1.ReleaseNamespaceLabel] == rel.Namespace
}

// fileName names an object as kubectl diff names its files: group.version.Kind.namespace.name.
func fileName(r ref) string {
	gv := r.GVR.Version
	if r.GVR.Group != "" {
		gv = r.GVR.Group + "." + gv
	}
	if r.Namespace == "" {
		return fmt.Sprintf("%s.%s.%s", gv, r.Kind, r.Name)
	}
	return fmt.Sprintf("%s.%s.%s.%s", gv, r.Kind, r.Namespace, r.Name)
}

// asYAML is an object as a diff shows it: without managed fields.
func asYAML(u *unstructured.Unstructured) string {
	c := u.DeepCopy()
	c.SetManagedFields(nil)
	raw, err := yaml.Marshal(c.Object)
	if err != nil {
		return fmt.Sprintf("# not shown: %v\n", err)
	}
	return string(raw)
}

// maskSecret masks a Secret's values as kubectl diff does: "***", or "*** (before)" and
// "*** (after)" where the value changes.
func maskSecret(live *unstructured.Unstructured, liveYAML string, merged *unstructured.Unstructured, mergedYAML string) (string, string) {
	if merged.GetKind() != "Secret" || merged.GroupVersionKind().Group != "" {
		return liveYAML, mergedYAML
	}
	mask := func(u *unstructured.Unstructured, other *unstructured.Unstructured, changed string) string {
		if u == nil {
			return ""
		}
		c := u.DeepCopy()
		c.SetManagedFields(nil)
		for _, field := range []string{"data", "stringData"} {
			values, _, _ := unstructured.NestedMap(c.Object, field)
			var theirs map[string]any
			if other != nil {
				theirs, _, _ = unstructured.NestedMap(other.Object, field)
			}
			keys := make([]string, 0, len(values))
			for k := range values {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				v := "***"
				if theirs != nil && fmt.Sprint(theirs[k]) != fmt.Sprint(values[k]) {
					v += changed
				}
				values[k] = v
			}
			if len(values) > 0 {
				_ = unstructured.SetNestedMap(c.Object, values, field)
			}
		}
		raw, _ := yaml.Marshal(c.Object)
		return string(raw)
	}
	return mask(live, merged, " (before)"), mask(merged, live, " (after)")
}
