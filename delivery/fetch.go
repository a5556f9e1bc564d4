package delivery

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// chartRecheck is how often a Release of a chart in a repository comes back to be fetched
// again: the Fetcher asks the repository only when its resolution is older than ResolveEvery, so
// that a new version in a range rolls out, and answers from what it keeps otherwise.
const chartRecheck = time.Minute

// defaultCharts is the process's Fetcher for Controllers given none: charts are kept once per
// process, whichever Controller fetched them.
var defaultCharts = sync.OnceValue(func() *chartrepo.Fetcher { return chartrepo.NewFetcher(chartrepo.Options{}) })

// fetchChart fetches the chart rel's spec.source.chart.repository names, with the credentials
// of its secretRef, which must be for the repository (chartrepo.CredentialsFromSecret). Errors
// name the field, the Secret or the repository, never what the Secret holds.
func (sr *sources) fetchChart(ctx context.Context, rel *v1alpha1.Release) (*chartrepo.Chart, error) {
	repo := rel.Spec.Source.Chart.Repository
	src := chartrepo.Source{URL: repo.URL, Chart: repo.Chart, Version: repo.Version, Digest: repo.Digest}
	if ref := repo.SecretRef; ref != nil {
		// Read when needed, not watched: a controller of many sets does not keep every Secret.
		secret, err := sr.kube.CoreV1().Secrets(rel.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("spec.source.chart.repository.secretRef: Secret %s not found in namespace %s", ref.Name, rel.Namespace)
		case err != nil:
			return nil, fmt.Errorf("spec.source.chart.repository.secretRef: reading Secret %s/%s: %w", rel.Namespace, ref.Name, err)
		}
		creds, err := chartrepo.CredentialsFromSecret(secret, repo.URL)
		if err != nil {
			return nil, fmt.Errorf("spec.source.chart.repository.secretRef: %w", err)
		}
		src.Credentials = creds
	}
	ch, err := sr.charts.Fetch(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("spec.source.chart.repository: %w", err)
	}
	return ch, nil
}
