package optikon

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
)

// optikonReleaseFor reads Optikon release id as the caller: 404 when the set has none, 400 when the
// Release of that name was not made by POST /v0/releases (its objects are not this API's to
// change).
func optikonReleaseFor(ctx context.Context, c callerClients, ns, id string) (*v1alpha1.Release, error) {
	rel, err := c.registry.ClusterregistryV1alpha1().Releases(ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if rel.Labels[ReleaseLabel] != id {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("release %s was not made by POST /v0/releases: change it with the registry's API (clusterregistry, fleet-api's /charts)", id))
	}
	return rel, nil
}

// v0UpdateRelease is PUT /v0/releases/{releaseId}: the release upgraded to the uploaded chart,
// on the clusters it is on, a new revision on each. ?labels=, when given, must select what the
// release was made for: an upgrade of some of its clusters alone is refused, not half-done.
func (a *API) updateRelease(r *http.Request) (httpapi.Response, error) {
	ns, err := a.core.Set()
	if err != nil {
		return httpapi.Response{}, err
	}
	id := r.PathValue("releaseId")
	asked, _, err := parseLabels(r)
	if err != nil {
		return httpapi.Response{}, err
	}
	up, err := readUpload(r, false)
	if err != nil {
		return httpapi.Response{}, err
	}
	c, err := a.caller(r)
	if err != nil {
		return httpapi.Response{}, err
	}
	if err := upgrade(r.Context(), c, ns, id, asked, up); err != nil {
		return httpapi.Response{}, err
	}
	return said(http.StatusOK, "release %s upgraded", id), nil
}

// upgrade stores the upload's chart in a Secret of its digest and points the Release at it,
// then removes the Secret it pointed at; a failure removes the new Secret.
func upgrade(ctx context.Context, c callerClients, ns, id, asked string, up chartUpload) error {
	rel, err := optikonReleaseFor(ctx, c, ns, id)
	if err != nil {
		return err
	}
	if (up.name != "" && up.name != id) || (up.namespace != "" && up.namespace != rel.Spec.TargetNamespace) {
		return apierrors.NewBadRequest(fmt.Sprintf("the form names release %s in namespace %s; the path's release %s is in namespace %s: an upgrade keeps both", up.name, up.namespace, id, rel.Spec.TargetNamespace))
	}
	if err := sameClusters(ctx, c, ns, id, asked); err != nil {
		return err
	}
	up.name = id
	secret := chartSecret(ns, up, map[string]string{ReleaseLabel: id})
	if _, err := c.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{FieldManager: "fleet-api"}); err != nil && !apierrors.IsAlreadyExists(err) {
		return storeError(err, "the chart's Secret", secret.Name)
	}
	old := ""
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.registry.ClusterregistryV1alpha1().Releases(ns).Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Spec.Source.Chart == nil || cur.Spec.Source.Chart.Secret == nil {
			return apierrors.NewBadRequest(fmt.Sprintf("release %s no longer delivers a chart from a Secret (it was changed with the registry's API): change it there", id))
		}
		old = cur.Spec.Source.Chart.Secret.Name
		cur.Spec.Source.Chart.Secret = &v1alpha1.ReleaseChartConfigMap{Name: secret.Name}
		_, err = c.registry.ClusterregistryV1alpha1().Releases(ns).Update(ctx, cur, metav1.UpdateOptions{FieldManager: "fleet-api"})
		return err
	})
	if err != nil {
		if old != secret.Name {
			_ = c.kube.CoreV1().Secrets(ns).Delete(context.Background(), secret.Name, metav1.DeleteOptions{})
		}
		return storeError(err, "its Release", id)
	}
	if old != "" && old != secret.Name {
		deleteIfOurs(ctx, c, ns, id, old)
	}
	return nil
}

// deleteIfOurs deletes the set's Secret name only if an Optikon POST or PUT of release id made
// it: a Release changed with the registry's API may point at any Secret of the set, which an
// upgrade must not delete.
func deleteIfOurs(ctx context.Context, c callerClients, ns, id, name string) {
	sec, err := c.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || sec.Labels[ReleaseLabel] != id {
		return
	}
	_ = c.kube.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
}

// sameClusters refuses ?labels= on an upgrade unless it is what the release's Placement selects.
func sameClusters(ctx context.Context, c callerClients, ns, id, asked string) error {
	if asked == "" {
		return nil
	}
	p, err := c.registry.ClusterregistryV1alpha1().Placements(ns).Get(ctx, PlacementName(id), metav1.GetOptions{})
	if err != nil {
		return storeError(err, "its Placement", PlacementName(id))
	}
	have := placementSelector(p)
	want, err := labels.Parse(asked)
	if err != nil || have.String() != want.String() {
		return apierrors.NewBadRequest(fmt.Sprintf("release %s is on the clusters %q selects; an upgrade of the clusters %q selects alone is not done: upgrade without labels, or DELETE with labels and POST again", id, have.String(), asked))
	}
	return nil
}

// v0DeleteRelease is DELETE /v0/releases/{releaseId}[?labels=]: without labels the release is
// removed from every cluster (its Release, Placement and chart Secrets deleted; the releases
// controller uninstalls it from each); with labels, from the clusters they select alone, which
// its Placement then excludes by name.
func (a *API) deleteRelease(r *http.Request) (httpapi.Response, error) {
	ns, err := a.core.Set()
	if err != nil {
		return httpapi.Response{}, err
	}
	id := r.PathValue("releaseId")
	asked, sel, err := parseLabels(r)
	if err != nil {
		return httpapi.Response{}, err
	}
	c, err := a.caller(r)
	if err != nil {
		return httpapi.Response{}, err
	}
	if _, err := optikonReleaseFor(r.Context(), c, ns, id); err != nil {
		return httpapi.Response{}, err
	}
	if asked == "" {
		if err := removeRelease(r.Context(), c, ns, id); err != nil {
			return httpapi.Response{}, err
		}
		return said(http.StatusOK, "release %s deleted from every cluster", id), nil
	}
	selector, _ := metav1.LabelSelectorAsSelector(sel)
	names, err := a.deleteFrom(r.Context(), c, ns, id, asked, selector)
	if err != nil {
		return httpapi.Response{}, err
	}
	return said(http.StatusOK, "release %s deleted from %s", id, strings.Join(names, ", ")), nil
}

// deleteFrom removes release id from the clusters selector (?labels=asked) selects, which it
// names: by excluding them from its Placement, or, when that would leave none, by removing it.
func (a *API) deleteFrom(ctx context.Context, c callerClients, ns, id, asked string, selector labels.Selector) ([]string, error) {
	// Which clusters the labels select, and whether any would be left, is judged on the Fleet's
	// view of the registry: a stale or failed one must not decide a delete.
	if st := a.core.Fleet().Status(); !st.Fresh() {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("the server's view of the registry's Clusters is not current (%v): try again", st))
	}
	names := a.selectedClusters(ns, selector)
	if len(names) == 0 {
		return nil, httpapi.StatusError(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no cluster of set %s has labels %q", ns, asked))
	}
	last, err := a.leavesNone(ctx, c, ns, id, names)
	if err != nil {
		return nil, err
	}
	if last {
		// An empty decision removes nothing (the releases controller's guard against a
		// placement gone wrong): the release leaving its last clusters is the release deleted.
		return names, removeRelease(ctx, c, ns, id)
	}
	return names, exclude(ctx, c, ns, id, names)
}

// leavesNone reports whether removing the release from names leaves it on no cluster its
// Placement selects.
func (a *API) leavesNone(ctx context.Context, c callerClients, ns, id string, names []string) (bool, error) {
	p, err := c.registry.ClusterregistryV1alpha1().Placements(ns).Get(ctx, PlacementName(id), metav1.GetOptions{})
	if err != nil {
		return false, storeError(err, "its Placement", PlacementName(id))
	}
	for _, n := range a.selectedClusters(ns, placementSelector(p)) {
		if !slices.Contains(p.Spec.Exclude, n) && !slices.Contains(names, n) {
			return false, nil
		}
	}
	return true, nil
}

// removeRelease deletes an Optikon release's Release, then its Placement and chart Secrets.
func removeRelease(ctx context.Context, c callerClients, ns, id string) error {
	if err := c.registry.ClusterregistryV1alpha1().Releases(ns).Delete(ctx, id, metav1.DeleteOptions{}); err != nil {
		return err
	}
	placements := c.registry.ClusterregistryV1alpha1().Placements(ns)
	// Its Placement, if it is still the one POST made: another of that name is not this API's.
	if p, err := placements.Get(ctx, PlacementName(id), metav1.GetOptions{}); err == nil && p.Labels[ReleaseLabel] == id {
		err = placements.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return storeError(err, "its Placement", PlacementName(id))
		}
	}
	err := c.kube.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: ReleaseLabel + "=" + id})
	return storeError(err, "its chart Secrets", "labelled "+ReleaseLabel+"="+id)
}

// exclude adds names to the release's Placement's exclusions.
func exclude(ctx context.Context, c callerClients, ns, id string, names []string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := c.registry.ClusterregistryV1alpha1().Placements(ns).Get(ctx, PlacementName(id), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, n := range names {
			if !slices.Contains(p.Spec.Exclude, n) {
				p.Spec.Exclude = append(p.Spec.Exclude, n)
			}
		}
		_, err = c.registry.ClusterregistryV1alpha1().Placements(ns).Update(ctx, p, metav1.UpdateOptions{FieldManager: "fleet-api"})
		return err
	})
	if err != nil {
		return storeError(err, "its Placement", PlacementName(id))
	}
	return nil
}

// placementSelector is the label selector of a Placement: every Cluster when it has none.
func placementSelector(p *v1alpha1.Placement) labels.Selector {
	if p.Spec.Selector == nil {
		return labels.Everything()
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}
