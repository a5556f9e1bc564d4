package optikon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
)

// An Optikon release is three objects of the set, made as the caller: the uploaded chart in a
// Secret (named after the release and the chart's digest, so an upgrade is a new Secret and is
// delivered at once), a Placement of the clusters its labels select, and a Release of the chart
// in Helm mode, installed in its namespace on each (made where missing). The three carry
// ReleaseLabel, so that DELETE finds them.

// ReleaseLabel names, on each object an Optikon release made, the release.
const ReleaseLabel = "optikon.clusterregistry.k8s.io/release"

// chartSecretName is the Secret holding a release's chart of digest.
func chartSecretName(release, digest string) string {
	return "optikon-" + release + "-" + strings.TrimPrefix(digest, "sha256:")[:10]
}

// PlacementName is an Optikon release's Placement.
func PlacementName(release string) string { return "optikon-" + release }

// callerClients are the caller's clients of the registry: its API and the core one (Secrets).
type callerClients struct {
	registry versioned.Interface
	kube     kubernetes.Interface
}

// caller is the caller's clients.
func (a *API) caller(r *http.Request) (callerClients, error) {
	cfg, err := a.core.CallerConfig(r.Context())
	if err != nil {
		return callerClients{}, err
	}
	var c callerClients
	if c.registry, err = versioned.NewForConfig(cfg); err != nil {
		return callerClients{}, err
	}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return callerClients{}, err
	}
	return c, nil
}

// parseLabels reads ?labels=K=V,K=V (a label selector), saying what is wrong with it.
func parseLabels(r *http.Request) (string, *metav1.LabelSelector, error) {
	q := r.URL.Query().Get("labels")
	sel, err := metav1.ParseToLabelSelector(q)
	if err != nil {
		return "", nil, apierrors.NewBadRequest(fmt.Sprintf("labels %q is not a label selector (K=V,K=V): %v", q, err))
	}
	return q, sel, nil
}

// v0CreateRelease is POST /v0/releases: the chart installed on every cluster ?labels= selects
// (every cluster of the set without it), in namespace. A failure leaves nothing behind.
func (a *API) createRelease(r *http.Request) (httpapi.Response, error) {
	ns, err := a.core.Set()
	if err != nil {
		return httpapi.Response{}, err
	}
	_, selector, err := parseLabels(r)
	if err != nil {
		return httpapi.Response{}, err
	}
	up, err := readUpload(r, true)
	if err != nil {
		return httpapi.Response{}, err
	}
	c, err := a.caller(r)
	if err != nil {
		return httpapi.Response{}, err
	}
	if err := makeRelease(r.Context(), c, ns, up, selector); err != nil {
		return httpapi.Response{}, err
	}
	return said(http.StatusCreated, "release %s of chart %s (%s) made in cluster set %s, installed in namespace %s of each cluster it selects",
		up.name, up.chartName, up.digest, ns, up.namespace), nil
}

// makeRelease makes the three objects of an Optikon release, undoing what it made when one
// cannot be made.
func makeRelease(ctx context.Context, c callerClients, ns string, up chartUpload, selector *metav1.LabelSelector) (err error) {
	var undo []func() error
	defer func() {
		if err == nil {
			return
		}
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](); uerr != nil && !apierrors.IsNotFound(uerr) {
				err = fmt.Errorf("%w; and undoing what was made failed: %v", err, uerr)
			}
		}
	}()
	mine := map[string]string{ReleaseLabel: up.name}
	secret := chartSecret(ns, up, mine)
	if _, err := c.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{FieldManager: "fleet-api"}); err != nil {
		return storeError(err, "the chart's Secret", secret.Name)
	}
	undo = append(undo, func() error {
		return c.kube.CoreV1().Secrets(ns).Delete(context.Background(), secret.Name, metav1.DeleteOptions{})
	})
	placements := c.registry.ClusterregistryV1alpha1().Placements(ns)
	p := &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: PlacementName(up.name), Labels: mine}, Spec: v1alpha1.PlacementSpec{Selector: selector}}
	if _, err := placements.Create(ctx, p, metav1.CreateOptions{FieldManager: "fleet-api"}); err != nil {
		return storeError(err, "its Placement", p.Name)
	}
	undo = append(undo, func() error { return placements.Delete(context.Background(), p.Name, metav1.DeleteOptions{}) })
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: up.name, Labels: mine},
		Spec: v1alpha1.ReleaseSpec{Placement: v1alpha1.ReleasePlacement{Name: p.Name}, TargetNamespace: up.namespace, CreateNamespace: true,
			Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{Secret: &v1alpha1.ReleaseChartConfigMap{Name: secret.Name}, Mode: v1alpha1.ChartModeHelm}}}}
	if _, err := c.registry.ClusterregistryV1alpha1().Releases(ns).Create(ctx, rel, metav1.CreateOptions{FieldManager: "fleet-api"}); err != nil {
		return storeError(err, "its Release", rel.Name)
	}
	return nil
}

// chartSecret is the Secret that holds an upload's chart.
func chartSecret(ns string, up chartUpload, mine map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: chartSecretName(up.name, up.digest), Namespace: ns, Labels: mine,
		Annotations: map[string]string{"clusterregistry.k8s.io/chart-digest": up.digest}},
		Data: map[string][]byte{"chart.tgz": up.chart}}
}

// storeError says which object of an Optikon release could not be made: one that exists is the
// caller's to upgrade (PUT), not to make again.
func storeError(err error, what, name string) error {
	if err == nil {
		return nil
	}
	if apierrors.IsAlreadyExists(err) {
		return apierrors.NewBadRequest(fmt.Sprintf("%s %s exists already: PUT /v0/releases/NAME upgrades a release, DELETE removes it", what, name))
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		st.Message = fmt.Sprintf("%s %s: %s", what, name, st.Message)
		return &apierrors.StatusError{ErrStatus: st}
	}
	return fmt.Errorf("%s %s: %w", what, name, err)
}

// selectedClusters are the names of the set's Clusters that selector chooses.
func (a *API) selectedClusters(ns string, selector labels.Selector) []string {
	var out []string
	for _, m := range a.core.Fleet().Members() {
		if c := m.Cluster(); c.Namespace == ns && selector.Matches(labels.Set(c.Labels)) {
			out = append(out, c.Name)
		}
	}
	return out
}
