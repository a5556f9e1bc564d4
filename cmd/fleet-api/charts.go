package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
)

// chartRelease is one chart release in GET /charts: a Release of the registry whose source is a
// chart, what it asks for, and how its members fare.
type chartRelease struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	Placement       string `json:"placement"`
	TargetNamespace string `json:"targetNamespace,omitempty"`
	// Source is what the Release delivers: Chart, Manifests (inline) or ConfigMap (YAML streams
	// in a ConfigMap of the set). GET /charts serves Chart releases only; GET /releases every one.
	Source string `json:"source"`
	// Manifests is how many objects a Manifests release holds; ConfigMap names a ConfigMap
	// release's ConfigMap.
	Manifests    int                               `json:"manifests,omitempty"`
	ConfigMap    string                            `json:"configMap,omitempty"`
	Chart        chartSpec                         `json:"chart,omitzero"`
	Values       json.RawMessage                   `json:"values,omitempty"`
	ValuesFrom   []v1alpha1.ReleaseValuesReference `json:"valuesFrom,omitempty"`
	MemberValues []v1alpha1.ReleaseMemberValue     `json:"memberValues,omitempty"`
	// Delivered is the chart the revision delivers (status.chart): its version and digest.
	Delivered  *v1alpha1.ReleaseChartStatus `json:"delivered,omitempty"`
	Revision   string                       `json:"revision,omitempty"`
	Members    int32                        `json:"members"`
	Ready      int32                        `json:"ready"`
	Conditions []chartCondition             `json:"conditions,omitempty"`
	// PerMember is each member's phase and revision, from the Release's status slices.
	PerMember []chartMember `json:"perMember"`
}

// chartSpec is where a chart release's chart comes from: a repository (url, chart, version,
// digest, secretRef) or a ConfigMap of the set.
type chartSpec struct {
	URL       string `json:"url,omitempty"`
	Chart     string `json:"chart,omitempty"`
	Version   string `json:"version,omitempty"`
	Digest    string `json:"digest,omitempty"`
	SecretRef string `json:"secretRef,omitempty"`
	ConfigMap string `json:"configMap,omitempty"`
	Secret    string `json:"secret,omitempty"`
	// Mode is Render (the default) or Helm: Helm's own install on each member.
	Mode string `json:"mode,omitempty"`
}

type chartCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

type chartMember struct {
	Cluster  string `json:"cluster"`
	Phase    string `json:"phase"`
	Revision string `json:"revision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	// Feedback are the values the Release's spec.feedback read on the member.
	Feedback map[string]string `json:"feedback,omitempty"`
	// Shares are the member's shares of the Release's spec.divide, by division: the replicas it
	// was applied with.
	Shares map[string]int32 `json:"shares,omitempty"`
}

// chartRequest is the body of POST /charts and PUT /charts/{namespace}/{name}; PATCH takes
// any of version and values.
type chartRequest struct {
	Namespace       string                            `json:"namespace"`
	Name            string                            `json:"name"`
	Placement       string                            `json:"placement"`
	TargetNamespace string                            `json:"targetNamespace,omitempty"`
	Chart           chartSpec                         `json:"chart"`
	Values          json.RawMessage                   `json:"values,omitempty"`
	ValuesFrom      []v1alpha1.ReleaseValuesReference `json:"valuesFrom,omitempty"`
	MemberValues    []v1alpha1.ReleaseMemberValue     `json:"memberValues,omitempty"`
}

var releaseResource = v1alpha1.SchemeGroupVersion.WithResource("releases").GroupResource()

// The sources a release summary names.
const (
	sourceChart     = "Chart"
	sourceManifests = "Manifests"
	sourceConfigMap = "ConfigMap"
)

// chartReleaseOf is the chart release rel is, with its members from slices; ok is false for a
// Release whose source is not a chart.
func chartReleaseOf(rel *v1alpha1.Release, slices []v1alpha1.ReleaseStatusSlice) (chartRelease, bool) {
	out := releaseOf(rel, slices)
	return out, out.Source == sourceChart
}

// releaseOf is rel as the dashboard and GET /releases show it, whatever it delivers, with its
// members from slices.
func releaseOf(rel *v1alpha1.Release, slices []v1alpha1.ReleaseStatusSlice) chartRelease {
	out := chartRelease{Namespace: rel.Namespace, Name: rel.Name, Placement: rel.Spec.Placement.Name, TargetNamespace: rel.Spec.TargetNamespace,
		Revision: rel.Status.Revision, Members: rel.Status.Members, Ready: rel.Status.Ready, PerMember: []chartMember{}}
	if out.Placement == "" {
		out.Placement = rel.Spec.Placement.DecisionKey
	}
	switch src := rel.Spec.Source; {
	case src.Chart != nil:
		out.Source = sourceChart
		chartSource(&out, rel)
	case src.ConfigMap != nil:
		out.Source, out.ConfigMap = sourceConfigMap, src.ConfigMap.Name
	default:
		out.Source, out.Manifests = sourceManifests, len(src.Manifests)
	}
	for _, c := range rel.Status.Conditions {
		out.Conditions = append(out.Conditions, chartCondition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	for _, m := range v1alpha1.MembersOf(rel, slices) {
		cm := chartMember{Cluster: m.Cluster, Phase: string(m.Phase), Revision: m.Revision, Reason: m.Reason, Message: m.Message}
		for _, f := range m.Feedback {
			if cm.Feedback == nil {
				cm.Feedback = map[string]string{}
			}
			cm.Feedback[f.Name] = f.Value
		}
		for _, sh := range m.Shares {
			if cm.Shares == nil {
				cm.Shares = map[string]int32{}
			}
			cm.Shares[sh.Name] = sh.Replicas
		}
		out.PerMember = append(out.PerMember, cm)
	}
	slicesSortMembers(out.PerMember)
	return out
}

// chartSource fills in what a chart release's chart and values are.
func chartSource(out *chartRelease, rel *v1alpha1.Release) {
	src := rel.Spec.Source.Chart
	out.MemberValues, out.ValuesFrom, out.Delivered = src.MemberValues, src.ValuesFrom, rel.Status.Chart
	switch {
	case src.Repository != nil:
		r := src.Repository
		out.Chart = chartSpec{URL: r.URL, Chart: r.Chart, Version: r.Version, Digest: r.Digest}
		if r.SecretRef != nil {
			out.Chart.SecretRef = r.SecretRef.Name
		}
	case src.ConfigMap != nil:
		out.Chart = chartSpec{ConfigMap: src.ConfigMap.Name}
	case src.Secret != nil:
		out.Chart = chartSpec{Secret: src.Secret.Name}
	}
	out.Chart.Mode = string(cmp.Or(src.Mode, v1alpha1.ChartModeRender))
	if src.Values != nil {
		out.Values = json.RawMessage(src.Values.Raw)
	}
}

func slicesSortMembers(ms []chartMember) {
	slices.SortFunc(ms, func(a, b chartMember) int { return strings.Compare(a.Cluster, b.Cluster) })
}

// setNamespaces are the cluster sets the server serves: those it was started with, or those of
// its members.
func (s *server) setNamespaces() []string {
	if len(s.namespaces) > 0 {
		return s.namespaces
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range s.fleet.Members() {
		if ns := m.Name().Namespace; !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// listCharts answers the chart releases of the sets where the caller may list Releases, read
// from the registry as the caller (?namespace= for one set).
func (s *server) listCharts(r *http.Request) (response, error) { return s.listReleases(r, true) }

// listReleasesRoute is GET /releases: listCharts for every Release, whatever it delivers.
func (s *server) listReleasesRoute(r *http.Request) (response, error) {
	return s.listReleases(r, false)
}

// listReleases answers the Releases of the sets where the caller may list them (chart releases
// alone when charts), as the caller.
func (s *server) listReleases(r *http.Request, charts bool) (response, error) {
	namespaces := s.setNamespaces()
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		namespaces = []string{ns}
	}
	registry, err := s.guard.asCaller(r.Context())
	if err != nil {
		return response{}, err
	}
	out := []chartRelease{}
	// A set whose Releases the caller may not list is left out, and said, with the registry's
	// words: a settled answer, where an empty list would read as "no Releases".
	notPermitted := map[string]string{}
	for _, ns := range namespaces {
		list, err := registry.ClusterregistryV1alpha1().Releases(ns).List(r.Context(), metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			notPermitted[ns] = err.Error()
			continue
		}
		if err != nil {
			return response{}, err
		}
		var statusSlices []v1alpha1.ReleaseStatusSlice
		if sl, err := registry.ClusterregistryV1alpha1().ReleaseStatusSlices(ns).List(r.Context(), metav1.ListOptions{}); err == nil {
			statusSlices = sl.Items // without them (not allowed), members are left out, not invented
		}
		for i := range list.Items {
			if c := releaseOf(&list.Items[i], statusSlices); !charts || c.Source == sourceChart {
				out = append(out, c)
			}
		}
	}
	_, rev, _ := s.charts.feed.snapshot()
	field := "releases"
	if charts {
		field = "charts"
	}
	answer := map[string]any{field: out, "resourceVersion": formatRev(rev)}
	if len(notPermitted) > 0 {
		answer["notPermitted"] = notPermitted
	}
	return ok(answer), nil
}

// getChart answers one chart release, as the caller.
func (s *server) getChart(r *http.Request) (response, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	rel, registry, err := s.callerChart(r, ns, name)
	if err != nil {
		return response{}, err
	}
	var statusSlices []v1alpha1.ReleaseStatusSlice
	if sl, err := registry.ClusterregistryV1alpha1().ReleaseStatusSlices(ns).List(r.Context(), metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=" + name}); err == nil {
		statusSlices = sl.Items
	}
	c, _ := chartReleaseOf(rel, statusSlices)
	return ok(c), nil
}

// callerChart reads Release ns/name as the caller; 404 when its source is not a chart (/charts
// serves chart releases only). It answers the caller's client of the registry too, for what the
// route does next.
func (s *server) callerChart(r *http.Request, ns, name string) (*v1alpha1.Release, versioned.Interface, error) {
	registry, err := s.guard.asCaller(r.Context())
	if err != nil {
		return nil, nil, err
	}
	rel, err := registry.ClusterregistryV1alpha1().Releases(ns).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	if rel.Spec.Source.Chart == nil {
		return nil, nil, httpapi.StatusError(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("release %s/%s delivers manifests, not a chart", ns, name))
	}
	return rel, registry, nil
}

// The bodies the chart routes take, as their errors name them: POST's and PUT's whole chart
// release, PATCH's version and values.
const (
	chartReleaseBody = "a chart release: namespace, name, placement, targetNamespace, chart: {url, chart, version, digest, secretRef, mode} or {configMap, mode} or {secret, mode}, values, valuesFrom, memberValues"
	chartPatchBody   = "a change of a chart release: version, values"
)

// decodeChartRequest reads a body that is what names (chartReleaseBody, chartPatchBody).
func decodeChartRequest(r *http.Request, into any, what string) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("the body is not %s: %v", what, err))
	}
	return nil
}

// source is the Release source a chartRequest asks for.
func (c chartRequest) source() (*v1alpha1.ReleaseChartSource, error) {
	src := &v1alpha1.ReleaseChartSource{MemberValues: c.MemberValues, ValuesFrom: c.ValuesFrom, Mode: v1alpha1.ReleaseChartMode(c.Chart.Mode)}
	switch {
	case (c.Chart.URL != "") && (c.Chart.ConfigMap != "" || c.Chart.Secret != "") || c.Chart.ConfigMap != "" && c.Chart.Secret != "":
		return nil, fmt.Errorf("chart: set one of url (a repository), configMap and secret")
	case c.Chart.URL != "":
		src.Repository = &v1alpha1.ReleaseChartRepository{URL: c.Chart.URL, Chart: c.Chart.Chart, Version: c.Chart.Version, Digest: c.Chart.Digest}
		if c.Chart.SecretRef != "" {
			src.Repository.SecretRef = &v1alpha1.ReleaseSecretReference{Name: c.Chart.SecretRef}
		}
	case c.Chart.ConfigMap != "":
		src.ConfigMap = &v1alpha1.ReleaseChartConfigMap{Name: c.Chart.ConfigMap}
	case c.Chart.Secret != "":
		src.Secret = &v1alpha1.ReleaseChartConfigMap{Name: c.Chart.Secret}
	default:
		return nil, fmt.Errorf("chart: set url (oci:// or https://), configMap or secret")
	}
	if len(c.Values) > 0 && string(c.Values) != "null" {
		src.Values = &runtime.RawExtension{Raw: c.Values}
	}
	return src, nil
}

// createChart releases a chart on a Placement's members: a Release created as the caller, so
// the registry decides whether they may (the edit role of the set).
func (s *server) createChart(r *http.Request) (response, error) {
	var req chartRequest
	if err := decodeChartRequest(r, &req, chartReleaseBody); err != nil {
		return response{}, err
	}
	if req.Namespace == "" || req.Name == "" || req.Placement == "" {
		return response{}, apierrors.NewBadRequest("namespace (the cluster set), name and placement are required")
	}
	src, err := req.source()
	if err != nil {
		return response{}, apierrors.NewBadRequest(err.Error())
	}
	registry, err := s.guard.asCaller(r.Context())
	if err != nil {
		return response{}, err
	}
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Chart: src}, Placement: v1alpha1.ReleasePlacement{Name: req.Placement}, TargetNamespace: req.TargetNamespace}}
	created, err := registry.ClusterregistryV1alpha1().Releases(req.Namespace).Create(r.Context(), rel, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return response{}, err
	}
	c, _ := chartReleaseOf(created, nil)
	return response{Code: http.StatusCreated, Body: c}, nil
}

// updateChart replaces a chart release's chart, values and member values (PUT) or changes its
// version and values (PATCH: {"version": ..., "values": ...}, each optional), as the caller. A
// Release changed meanwhile is the registry's 409: read it again.
func (s *server) updateChart(r *http.Request) (response, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	rel, registry, err := s.callerChart(r, ns, name)
	if err != nil {
		return response{}, err
	}
	rel = rel.DeepCopy()
	if r.Method == http.MethodPut {
		err = replaceChart(r, rel)
	} else {
		err = patchChart(r, rel)
	}
	if err != nil {
		return response{}, err
	}
	updated, err := registry.ClusterregistryV1alpha1().Releases(ns).Update(r.Context(), rel, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return response{}, err
	}
	c, _ := chartReleaseOf(updated, nil)
	return ok(c), nil
}

// replaceChart sets rel's chart, values, member values, Placement and target namespace from a
// PUT's body.
func replaceChart(r *http.Request, rel *v1alpha1.Release) error {
	var req chartRequest
	if err := decodeChartRequest(r, &req, chartReleaseBody); err != nil {
		return err
	}
	if (req.Namespace != "" && req.Namespace != rel.Namespace) || (req.Name != "" && req.Name != rel.Name) {
		return apierrors.NewBadRequest(fmt.Sprintf("the body names %s/%s, the path %s/%s", req.Namespace, req.Name, rel.Namespace, rel.Name))
	}
	src, err := req.source()
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	rel.Spec.Source.Chart = src
	if req.Placement != "" {
		rel.Spec.Placement = v1alpha1.ReleasePlacement{Name: req.Placement}
	}
	rel.Spec.TargetNamespace = req.TargetNamespace
	return nil
}

// patchChart changes rel's chart version and values from a PATCH's body.
func patchChart(r *http.Request, rel *v1alpha1.Release) error {
	var patch struct {
		Version *string         `json:"version"`
		Values  json.RawMessage `json:"values"`
	}
	if err := decodeChartRequest(r, &patch, chartPatchBody); err != nil {
		return err
	}
	src := rel.Spec.Source.Chart
	if patch.Version != nil {
		if src.Repository == nil {
			// A packaged chart in a ConfigMap or a Secret of the set: its version is the one
			// packaged there.
			holder := "the cluster set"
			switch {
			case src.ConfigMap != nil:
				holder = "ConfigMap " + src.ConfigMap.Name
			case src.Secret != nil:
				holder = "Secret " + src.Secret.Name
			}
			return apierrors.NewBadRequest(fmt.Sprintf("release %s/%s takes its chart from %s, which has no version to change: update the %s", rel.Namespace, rel.Name, holder, holder))
		}
		src.Repository.Version = *patch.Version
	}
	if len(patch.Values) > 0 {
		if string(patch.Values) == "null" {
			src.Values = nil
		} else {
			src.Values = &runtime.RawExtension{Raw: patch.Values}
		}
	}
	return nil
}

// deleteChart deletes a chart release as the caller: the releases controller removes its
// objects from the members (unless its deletion policy is Orphan).
func (s *server) deleteChart(r *http.Request) (response, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	_, registry, err := s.callerChart(r, ns, name)
	if err != nil {
		return response{}, err
	}
	if err := registry.ClusterregistryV1alpha1().Releases(ns).Delete(r.Context(), name, metav1.DeleteOptions{}); err != nil {
		return response{}, err
	}
	return ok(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusOK,
		Details: &metav1.StatusDetails{Name: name, Group: releaseResource.Group, Kind: "releases"}}), nil
}
