package main

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/informers/externalversions"
	listers "github.com/cluster-registry/sdk/listers/clusterregistry/v1alpha1"
)

// key is the chart release's namespace and name.
func (c chartRelease) key() (string, string) { return c.Namespace, c.Name }

// same reports whether two chart releases say the same thing: nothing in them is a time, so a
// status written again unchanged (a heartbeat) sends nothing.
func (c chartRelease) same(o chartRelease) bool { return reflect.DeepEqual(c, o) }

// chartWatch is what GET /watch/charts streams from: the registry's Releases and their status
// slices, watched with the server's own identity (each watcher sees only the sets where the
// registry lets them list Releases), and the feed of the chart releases they make.
type chartWatch struct {
	factories []externalversions.SharedInformerFactory
	releases  []listers.ReleaseLister
	// releaseInformers are the releases' informers, which server.followChanges counts the
	// changes of.
	releaseInformers []cache.SharedIndexInformer
	slices           []listers.ReleaseStatusSliceLister
	feed             *feed[chartRelease]
}

// watchCharts starts watching the Releases of namespaces (every one when empty), and polls them
// into a feed until ctx ends; wait for the informers with the returned chartWatch's sync.
func watchCharts(ctx context.Context, registry versioned.Interface, namespaces []string) (*chartWatch, error) {
	cw := &chartWatch{feed: newFeedOf[chartRelease](4096)}
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var synced []cache.InformerSynced
	for _, ns := range namespaces {
		f := externalversions.NewSharedInformerFactoryWithOptions(registry, 0, externalversions.WithNamespace(ns))
		rel := f.Clusterregistry().V1alpha1().Releases()
		sl := f.Clusterregistry().V1alpha1().ReleaseStatusSlices()
		synced = append(synced, rel.Informer().HasSynced, sl.Informer().HasSynced)
		cw.releases = append(cw.releases, rel.Lister())
		cw.releaseInformers = append(cw.releaseInformers, rel.Informer())
		cw.slices = append(cw.slices, sl.Lister())
		cw.factories = append(cw.factories, f)
		f.Start(ctx.Done())
	}
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		cw.stop()
		return nil, fmt.Errorf("listing the registry's Releases: %w", context.Cause(syncCtx))
	}
	return cw, nil
}

// stop stops the informers and waits for them.
func (cw *chartWatch) stop() {
	for _, f := range cw.factories {
		f.Shutdown()
	}
}

// summarizeAll is every release now, as GET /releases answers it (GET /charts, those of a chart).
func (cw *chartWatch) summarizeAll() map[types.NamespacedName]chartRelease {
	out := map[types.NamespacedName]chartRelease{}
	for i, rl := range cw.releases {
		rels, err := rl.List(labels.Everything())
		if err != nil {
			continue
		}
		for _, rel := range rels {
			slices, _ := cw.slices[i].ReleaseStatusSlices(rel.Namespace).List(labels.SelectorFromSet(labels.Set{v1alpha1.ReleaseLabel: rel.Name}))
			var items []v1alpha1.ReleaseStatusSlice
			for _, s := range slices {
				items = append(items, *s)
			}
			out[types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}] = releaseOf(rel, items)
		}
	}
	return out
}

// watchChartsRoute streams changes to what GET /charts answers, one JSON event a line, as GET
// /watch/clusters does for members: an ADDED for every chart release of the sets where the
// caller may list Releases (unless ?resourceVersion= resumes), then each change (its version
// delivered, a member's phase), and nothing while nothing changes. ?namespace= chooses one set.
func (s *server) watchChartsRoute(r *http.Request) (response, error) {
	return s.watchReleases(r, true)
}

// watchReleasesRoute is watchChartsRoute for every Release, whatever it delivers: GET
// /watch/releases, each event's release in its "release" field.
func (s *server) watchReleasesRoute(r *http.Request) (response, error) {
	return s.watchReleases(r, false)
}

// watchReleases streams the Releases the caller may list (chart releases alone when charts).
func (s *server) watchReleases(r *http.Request, charts bool) (response, error) {
	only := r.URL.Query().Get("namespace")
	if only != "" {
		if err := s.authorizeOn(r, "releases", "watch", only, ""); err != nil {
			return response{}, err
		}
	}
	set, route := func(e *watchEvent, c chartRelease) { e.Release = &c }, "GET /releases"
	if charts {
		set, route = func(e *watchEvent, c chartRelease) { e.Chart = &c }, "GET /charts"
	}
	return stream(r, s.charts.feed, func(c chartRelease) bool {
		return (only == "" || c.Namespace == only) && (!charts || c.Source == sourceChart)
	},
		func(ctx context.Context, ns, _ string) bool {
			ok, _, err := s.guard.allowedOn(ctx, "releases", "list", ns, "")
			return err == nil && ok
		}, set, route)
}

// authorizeOn is authorize for another resource of the registry's group.
func (s *server) authorizeOn(r *http.Request, resource, verb, namespace, name string) error {
	allowed, reason, err := s.guard.allowedOn(r.Context(), resource, verb, namespace, name)
	switch {
	case err != nil:
		return apierrors.NewInternalError(fmt.Errorf("asking the registry whether you may %s %s: %w", verb, resource, err))
	case !allowed:
		why := fmt.Sprintf("you cannot %s %s in the namespace %q", verb, resource, namespace)
		if reason != "" {
			why += ": " + reason
		}
		return apierrors.NewForbidden(v1alpha1.SchemeGroupVersion.WithResource(resource).GroupResource(), name, fmt.Errorf("%s", why))
	}
	return nil
}
