package delivery

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/helmrelease"
	"github.com/cluster-registry/sdk/multicluster"
)

// helmReleaseGVR names, in a member's inventory, the Helm release a Release in Helm mode keeps
// there: Helm's own record of it (its Secrets) is what the member holds; removing it is helm
// uninstall, not a delete.
var helmReleaseGVR = schema.GroupVersionResource{Group: "helm.sh", Version: "v1", Resource: "releases"}

// applyHelm installs or upgrades the Release's chart on one member with Helm's own actions
// (package helmrelease): a Configuration of its own, the member's discovery shared with every
// other operation on it, within ctx's deadline (MemberTimeout), waiting until Helm finds what it
// applied ready. The member is Ready once Helm says so.
func (c *Controller) applyHelm(ctx context.Context, rel *v1alpha1.Release, b *Bundle, key types.NamespacedName, m *multicluster.Member, previous map[ref]*applied) outcome {
	mc, err := c.clients.get(ctx, m)
	if err != nil {
		return failed(&memberError{class: classify(ctx, err), err: err})
	}
	ns := rel.TargetNamespaceOrDefault()
	if err := c.createNamespace(ctx, rel, m, ns); err != nil {
		return failed(err)
	}
	getter := mc.helm.Getter(ns)
	timeout := c.opts.MemberTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	// Objects the Release applied in render mode go first: Helm would refuse to take them over.
	var rendered []ref
	for r := range previous {
		if r.GVR != helmReleaseGVR {
			rendered = append(rendered, r)
		}
	}
	if len(rendered) > 0 {
		for _, r := range removalOrder(rendered) {
			c.writes.Add(1)
			if err := mc.deleteOne(ctx, r, rel.Name, rel.Namespace); err != nil {
				return failed(&memberError{class: classify(ctx, err), object: r.String(), err: fmt.Errorf("removing what render mode applied, before Helm mode: %w", err)})
			}
		}
	}
	// The bundle's revision goes on Helm's record: a controller that restarts finds what it
	// applied there and makes no Helm revision of it again.
	res, err := helmrelease.Apply(ctx, getter, rel.Name, ns, b.chart.archive, b.chart.valuesFor(m.Cluster()),
		helmrelease.Options{Timeout: timeout, Wait: true, Revision: b.Revision})
	// At debug level, each Helm operation and what it found: a pass that reached a member shows
	// here even when it changed nothing there.
	c.log.V(1).Info("helm release applied", "release", key.String(), "cluster", m.Name().String(),
		"unchanged", err == nil && res.Unchanged, "failed", err != nil)
	if err != nil || !res.Unchanged {
		c.writes.Add(1)
	}
	if err != nil {
		return failed(&memberError{class: classify(ctx, err), object: "Helm release " + ns + "/" + rel.Name, err: err})
	}
	r := ref{GVR: helmReleaseGVR, Kind: "HelmRelease", Namespace: ns, Name: rel.Name}
	return outcome{revision: b.Revision, helm: true, unchanged: res.Unchanged,
		objects: map[ref]*applied{r: {ref: r, status: "Current", message: fmt.Sprintf("Helm revision %d, %s", res.Revision, res.Status)}}}
}

// removeHelm uninstalls the Helm release r from a member, as helm uninstall does.
func (c *Controller) removeHelm(ctx context.Context, key types.NamespacedName, m *multicluster.Member, r ref) error {
	mc, err := c.clients.get(ctx, m)
	if err != nil {
		return err
	}
	getter := mc.helm.Getter(r.Namespace)
	timeout := c.opts.MemberTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	c.writes.Add(1)
	return helmrelease.Uninstall(ctx, getter, r.Name, r.Namespace, helmrelease.Options{Timeout: timeout, Wait: true})
}
