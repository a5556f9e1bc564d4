package delivery

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A Release's dependsOn are Releases of its cluster set that must be Ready on a member, at their
// current revision, before it is applied there; removed from a member, it goes first and its
// dependencies after. Both are decided per member from what this Controller knows of each
// Release on it (sharded, the replica that owns a member holds every Release's state on it), so a
// slow member holds only itself. A Release whose readiness changes tells the Releases that
// depend on it to look again; one that leaves a member tells its dependencies.

// release is a Release of the Controller's cache, or nil.
func (c *Controller) release(key types.NamespacedName) *v1alpha1.Release {
	obj, err := c.releaseLister.ByNamespace(key.Namespace).Get(key.Name)
	if err != nil {
		return nil
	}
	return obj.(*v1alpha1.Release)
}

// dependencyCycle is the cycle of dependencies rel is in, as "a → b → a", or "".
func (c *Controller) dependencyCycle(rel *v1alpha1.Release) string {
	var path []string
	var walk func(name string) bool
	seen := map[string]bool{}
	walk = func(name string) bool {
		path = append(path, name)
		if len(path) > 1 && name == rel.Name {
			return true
		}
		if !seen[name] {
			seen[name] = true
			if r := c.release(types.NamespacedName{Namespace: rel.Namespace, Name: name}); r != nil {
				for _, d := range r.Spec.DependsOn {
					if walk(d.Name) {
						return true
					}
				}
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if walk(rel.Name) {
		return strings.Join(path, " → ")
	}
	return ""
}

// missingDependencies are the Releases rel depends on that its cluster set does not have.
func (c *Controller) missingDependencies(rel *v1alpha1.Release) []string {
	var out []string
	for _, d := range rel.Spec.DependsOn {
		if c.release(types.NamespacedName{Namespace: rel.Namespace, Name: d.Name}) == nil {
			out = append(out, d.Name)
		}
	}
	return out
}

// dependents are the Releases of rel's cluster set that depend on it.
func (c *Controller) dependents(rel *v1alpha1.Release) []types.NamespacedName {
	objs, _ := c.releaseLister.ByNamespace(rel.Namespace).List(labels.Everything())
	var out []types.NamespacedName
	for _, o := range objs {
		r := o.(*v1alpha1.Release)
		if slices.ContainsFunc(r.Spec.DependsOn, func(d v1alpha1.ReleaseDependency) bool { return d.Name == rel.Name }) {
			out = append(out, types.NamespacedName{Namespace: r.Namespace, Name: r.Name})
		}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// dependencyGates are, for members of rel, why one may not be applied to yet (a dependency not
// Ready there at its current revision) and why one may not be removed from yet (a dependent
// still has its objects there).
func (c *Controller) dependencyGates(rel *v1alpha1.Release, members, leaving []types.NamespacedName) (waiting, held map[types.NamespacedName]string) {
	if len(rel.Spec.DependsOn) == 0 && len(leaving) == 0 {
		return nil, nil
	}
	type dependency struct {
		name     string
		revision string
	}
	var deps []dependency
	for _, d := range rel.Spec.DependsOn {
		dep := dependency{name: d.Name}
		if r := c.release(types.NamespacedName{Namespace: rel.Namespace, Name: d.Name}); r != nil {
			dep.revision = r.Status.Revision
		}
		deps = append(deps, dep)
	}
	var dependents []types.NamespacedName
	if len(leaving) > 0 {
		dependents = c.dependents(rel)
	}
	waiting, held = map[types.NamespacedName]string{}, map[types.NamespacedName]string{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range members {
		for _, d := range deps {
			if !c.readyOn(types.NamespacedName{Namespace: rel.Namespace, Name: d.name}, d.revision, k) {
				waiting[k] = fmt.Sprintf("waits for release %s to be Ready on this member at its current revision", d.name)
				break
			}
		}
	}
	for _, k := range leaving {
		for _, d := range dependents {
			if st := c.releases[d]; st != nil && st.members[k] != nil {
				held[k] = fmt.Sprintf("release %s, which depends on this one, still has its objects on this member", d.Name)
				break
			}
		}
	}
	return waiting, held
}

// readyOn: Release key runs revision on member k, every object Current; with c.mu held.
func (c *Controller) readyOn(key types.NamespacedName, revision string, k types.NamespacedName) bool {
	st := c.releases[key]
	if st == nil || revision == "" {
		return false
	}
	ms := st.members[k]
	return ms != nil && !ms.applying && ofRevision(ms.revision, revision) && ms.err == nil && ms.ready()
}

// tellDependents makes the Releases that depend on rel look again when the members it is Ready
// on at revision changed since it last told them (p is this pass's plan).
func (c *Controller) tellDependents(rel *v1alpha1.Release, st *releaseState, revision string, p plan) {
	dependents := c.dependents(rel)
	if len(dependents) == 0 {
		return // most Releases: no signature to work out over every member, each pass
	}
	ready := []string{revision}
	for k, j := range p.judged {
		if j.phase == v1alpha1.PhaseReady {
			ready = append(ready, k.Name)
		}
	}
	slices.Sort(ready[1:])
	sig := strings.Join(ready, ",")
	c.mu.Lock()
	changed := st.readySig != sig
	st.readySig = sig
	c.mu.Unlock()
	if !changed {
		return
	}
	for _, d := range dependents {
		c.queue.Add(d)
	}
}

// tellDependencies makes the Releases rel depends on look again: rel left some member, which
// one of them may have been waiting to leave.
func (c *Controller) tellDependencies(rel *v1alpha1.Release) {
	for _, d := range rel.Spec.DependsOn {
		c.queue.Add(types.NamespacedName{Namespace: rel.Namespace, Name: d.Name})
	}
}

// enqueueDependents, on a Release's change (its spec, its status's revision), makes those that
// depend on it look again: it may let them go on, or break a cycle they are in.
func (c *Controller) enqueueDependents(obj any) {
	if r, ok := obj.(*v1alpha1.Release); ok {
		for _, d := range c.dependents(r) {
			c.queue.Add(d)
		}
	}
}
