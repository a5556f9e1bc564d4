package delivery

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// applier applies a revision to one member in one mode, and says how it went, which
// applyMember records: server-side apply of the rendered objects, or Helm's own install and
// upgrade. previous are the objects the member had, to prune and to take as the Release's own.
type applier interface {
	apply(ctx context.Context, rel *v1alpha1.Release, b *Bundle, key types.NamespacedName, m *multicluster.Member,
		previous map[ref]*applied) outcome
}

// outcome is how an apply to one member went.
type outcome struct {
	// err is why the apply failed; left, with it, are the objects still to prune (nil: those
	// the member had).
	err  *memberError
	left map[ref]*applied
	// objects are the member's objects of revision, applied; helm says Helm mode applied them,
	// and unchanged that Helm found the revision there already.
	revision        string
	objects         map[ref]*applied
	helm, unchanged bool
	// shares are the member's shares of spec.divide that revision applied.
	shares []v1alpha1.ReleaseMemberShare
}

// failed is the outcome of an apply that failed with err.
func failed(err *memberError) outcome { return outcome{err: err} }

// applierFor is the applier of a bundle's mode.
func (c *Controller) applierFor(b *Bundle) applier {
	if b.chart != nil && b.chart.helm {
		return helmApplier{c}
	}
	return serverSideApplier{c}
}

// helmApplier is Helm mode's: helm.go.
type helmApplier struct{ c *Controller }

func (a helmApplier) apply(ctx context.Context, rel *v1alpha1.Release, b *Bundle, key types.NamespacedName, m *multicluster.Member,
	previous map[ref]*applied) outcome {
	return a.c.applyHelm(ctx, rel, b, key, m, previous)
}

// serverSideApplier applies each rendered object with server-side apply, in apply order, then
// prunes what the revision no longer has.
type serverSideApplier struct{ c *Controller }

func (sa serverSideApplier) apply(ctx context.Context, rel *v1alpha1.Release, b *Bundle, key types.NamespacedName, m *multicluster.Member,
	previous map[ref]*applied) outcome {
	relKey := types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}
	mc, err := sa.c.clients.get(ctx, m)
	if err != nil {
		return failed(&memberError{class: classify(ctx, err), err: err})
	}
	owned := func(r ref) bool { _, ok := previous[r]; return ok }
	defaultNS := rel.TargetNamespaceOrDefault()
	objs, err := b.objectsFor(m.Cluster())
	if err != nil {
		return failed(&memberError{class: v1alpha1.FailureInvalid, err: err})
	}
	if err := sa.c.createNamespace(ctx, rel, m, defaultNS); err != nil {
		return failed(err)
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
			return failed(&memberError{class: classify(ctx, err), object: describe(u, a.ref), err: err})
		}
		sa.c.watchKind(a.ref.GVR)
		objects[a.ref] = &a
	}
	if err := sa.c.prune(ctx, rel, key, m, mc, previous, objects); err != nil {
		return outcome{err: err, left: objects} // what is left to prune, tried again at the next turn
	}
	return outcome{revision: b.revisionFor(m.Cluster()), objects: objects, shares: b.SharesFor(m.Cluster())}
}
