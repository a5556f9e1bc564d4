package optikon

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
	"github.com/cluster-registry/sdk/multicluster"
)

// Release is one release on one cluster, in the shape Optikon's API gave Helm's (its
// release.Release, with OnCluster): as Helm on that cluster reports it.
type Release struct {
	Name      string
	Namespace string
	// Version is the release's revision on that cluster, as `helm history` numbers it.
	Version   int
	OnCluster string
	Chart     struct {
		Metadata struct{ Name, Version string }
	}
	Info struct {
		Status struct{ Code string }
		// FirstDeployed and LastDeployed are RFC 3339 times, as Helm records them.
		FirstDeployed, LastDeployed string
	}
	Config struct{ Raw string }
}

// listReleases is GET /v0/releases[?labels=]: every Helm-mode chart Release of the set, once
// per cluster ?labels= selects that Helm reports it on, from the server's watch of the Releases
// and its caches of Helm's storage on the members: nothing is asked of either per poll, and the
// answer is computed once per change (serveAnswer).
func (a *API) listReleases(r *http.Request) (httpapi.Response, error) {
	ns, selector, err := a.releaseQuery(r, "list", "")
	if err != nil {
		return httpapi.Response{}, err
	}
	return a.core.Kept("v0/releases", ns, url.Values{"labels": {selector.String()}}, func() any { return a.releases(ns, selector, "") })
}

// getRelease is GET /v0/releases/{releaseId}[?labels=]: the release on the first cluster (by
// name) that ?labels= selects and Helm reports it on.
func (a *API) getRelease(r *http.Request) (httpapi.Response, error) {
	id := r.PathValue("releaseId")
	ns, selector, err := a.releaseQuery(r, "get", id)
	if err != nil {
		return httpapi.Response{}, err
	}
	if a.helmRelease(ns, id) == nil {
		return httpapi.Response{}, apierrors.NewNotFound(v1alpha1.SchemeGroupVersion.WithResource("releases").GroupResource(), id)
	}
	found := a.releases(ns, selector, id)
	if len(found) == 0 {
		return httpapi.Response{}, httpapi.StatusError(http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("release %s is installed on no cluster that labels %q selects yet", id, r.URL.Query().Get("labels")))
	}
	return httpapi.OK(found[0]), nil
}

// releaseQuery is the set, and the clusters ?labels= selects, for a caller who may verb
// Releases there.
func (a *API) releaseQuery(r *http.Request, verb, name string) (string, labels.Selector, error) {
	ns, err := a.core.Set()
	if err != nil {
		return "", nil, err
	}
	_, sel, err := parseLabels(r)
	if err != nil {
		return "", nil, err
	}
	selector, _ := metav1.LabelSelectorAsSelector(sel)
	return ns, selector, a.core.Authorize(r, "releases", verb, ns, name)
}

// helmRelease is the set's Release name when it is a chart's in Helm mode, from the server's
// watch; nil otherwise.
func (a *API) helmRelease(ns, name string) *v1alpha1.Release {
	for _, rel := range a.core.Releases(ns) {
		if rel.Name == name && isHelmMode(rel) {
			return rel
		}
	}
	return nil
}

func isHelmMode(rel *v1alpha1.Release) bool {
	return rel.Spec.Source.Chart != nil && rel.Spec.Source.Chart.Mode == v1alpha1.ChartModeHelm
}

// releases are the set's Helm-mode releases (only name, when set) on the clusters selector
// chooses, as Helm on each reports them, ordered by release and cluster.
func (a *API) releases(ns string, selector labels.Selector, only string) []Release {
	var rels []*v1alpha1.Release
	for _, rel := range a.core.Releases(ns) {
		if isHelmMode(rel) && (only == "" || rel.Name == only) {
			rels = append(rels, rel)
		}
	}
	slices.SortFunc(rels, func(a, b *v1alpha1.Release) int { return strings.Compare(a.Name, b.Name) })
	members := a.core.Fleet().Members()
	slices.SortFunc(members, func(a, b *multicluster.Member) int { return strings.Compare(a.Name().Name, b.Name().Name) })
	out := []Release{}
	for _, rel := range rels {
		for _, m := range members {
			c := m.Cluster()
			if c.Namespace != ns || !selector.Matches(labels.Set(c.Labels)) {
				continue
			}
			if rev, ok := a.newestRevision(m, rel); ok {
				out = append(out, releaseOf(rev, c.Name, rel))
			}
		}
	}
	return out
}

// newestRevision is the newest revision of rel's Helm release on member m, from the cache.
func (a *API) newestRevision(m *multicluster.Member, rel *v1alpha1.Release) (helmRevision, bool) {
	secrets := a.core.HelmStorage(m, labels.SelectorFromSet(labels.Set{"name": rel.Name}))
	var newest helmRevision
	found := false
	for _, sec := range secrets {
		rev, ok := cachedHelmRevision(sec)
		if ok && sec.Namespace == rel.Spec.TargetNamespace && rev.Name == rel.Name && (!found || rev.Version > newest.Version) {
			newest, found = rev, true
		}
	}
	return newest, found
}

// releaseOf is rev, Helm's on cluster, as Optikon shows it. Config is the values the
// Release itself gives (spec's values, which whoever may read the Release reads there), not
// what the member holds: those merge in values from Secrets the caller may not read.
func releaseOf(rev helmRevision, cluster string, rel *v1alpha1.Release) Release {
	out := Release{Name: rev.Name, Namespace: rev.Namespace, Version: rev.Version, OnCluster: cluster}
	if v := rel.Spec.Source.Chart.Values; v != nil && len(v.Raw) > 0 {
		if raw, err := yaml.JSONToYAML(v.Raw); err == nil {
			out.Config.Raw = string(raw)
		}
	}
	out.Chart.Metadata.Name, out.Chart.Metadata.Version = rev.ChartName, rev.ChartVersion
	out.Info.Status.Code = optikonStatus(rev.Status)
	out.Info.FirstDeployed, out.Info.LastDeployed = rev.FirstDeployed, rev.LastDeployed
	return out
}
