package delivery

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// applier applies a revision to one member in one mode, and records how it went in the
// member's state (through fail, or as applied): server-side apply of the rendered objects, or
// Helm's own install and upgrade. previous are the objects the member had, to prune and to
// take as the Release's own.
type applier interface {
	apply(ctx context.Context, rel *v1alpha1.Release, b *Bundle, key types.NamespacedName, m *multicluster.Member, ms *memberState,
		previous map[ref]*applied, fail func(*memberError))
}

// applierFor is the applier of a bundle's mode.
func (c *Controller) applierFor(b *Bundle) applier {
	if b.chart != nil && b.chart.helm {
		return helmApplier{c}
	}
	return serverSideApplier{c}
}

// helmApplier is Helm mode's: helm.go.
type helmApplier struct{ c *Controller }

func (a helmApplier) apply(ctx context.Context, rel *v1alpha1.Release, b *Bundle, key types.NamespacedName, m *multicluster.Member, ms *memberState,
	_ map[ref]*applied, fail func(*memberError)) {
	a.c.applyHelm(ctx, rel, b, key, m, ms, fail)
}

// serverSideApplier applies each rendered object with server-side apply, in apply order, then
// prunes what the revision no longer has.
type serverSideApplier struct{ c *Controller }

func (sa serverSideApplier) apply(ctx context.Context, rel *v1alpha1.Release, b *Bundle, key types.NamespacedName, m *multicluster.Member, ms *memberState,
	previous map[ref]*applied, fail func(*memberError)) {
	relKey := types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}
	mc, err := sa.c.clients.get(ctx, m)
	if err != nil {
		fail(&memberError{class: classify(ctx, err), err: err})
		return
	}
	owned := func(r ref) bool { _, ok := previous[r]; return ok }
	defaultNS := rel.TargetNamespaceOrDefault()
	objs, err := b.objectsFor(m.Cluster())
	if err != nil {
		fail(&memberError{class: v1alpha1.FailureInvalid, err: err})
		return
	}
	if err := sa.c.createNamespace(ctx, rel, m, defaultNS); err != nil {
		fail(err)
		return
	}
	objects := map[ref]*applied{}
	rules := sa.c.rulesOf(relKey)
	for _, u := range objs {
		sa.c.writes.Add(1)
		a, err := mc.applyOne(ctx, u, defaultNS, sa.c.fieldManager(relKey), owned, rules)
		if err != nil {
			if isNoMatchOrDiscovery(err) {
				sa.c.clients.forget(m)
			}
			fail(&memberError{class: classify(ctx, err), object: describe(u, a.ref), err: err})
			return
		}
		sa.c.watchKind(a.ref.GVR)
		objects[a.ref] = &a
	}
	if err := sa.c.prune(ctx, rel, key, m, mc, previous, objects); err != nil {
		fail(err)
		sa.c.mu.Lock()
		ms.objects = objects // what is left to prune, tried again at the next turn
		sa.c.mu.Unlock()
		return
	}
	sa.c.recordApplied(relKey, ms, b.revisionFor(m.Cluster()), objects)
}
