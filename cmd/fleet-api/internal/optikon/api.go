package optikon

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
	"github.com/cluster-registry/sdk/multicluster"
)

// Core is what Optikon's API asks of fleet-api: the operations its native routes run on, each
// as the request's caller, and the caches it answers from. Errors are the registry's
// (apierrors.APIStatus), which Encode writes as Optikon's APIResponse.
type Core interface {
	// Set is the cluster set /v0 serves, or why it serves none.
	Set() (string, error)
	// Fleet is the fleet of the registry's members.
	Fleet() *multicluster.Fleet
	// Member is what the caches say of a member now.
	Member(m *multicluster.Member) Member
	// Authorize says whether the caller may verb resource (clusters, releases) in ns (name,
	// when one object).
	Authorize(r *http.Request, resource, verb, ns, name string) error
	// MemberAs is the member ns/name, for a caller who may verb its Cluster.
	MemberAs(r *http.Request, verb, ns, name string) (*multicluster.Member, error)
	// DecodeCluster reads a request's Cluster, as the native routes read one.
	DecodeCluster(r *http.Request) (*v1alpha1.Cluster, error)
	// RegisterCluster, ReplaceCluster and RemoveCluster write a Cluster as the caller, checked
	// as the native routes check it.
	RegisterCluster(r *http.Request, c *v1alpha1.Cluster) (*v1alpha1.Cluster, error)
	ReplaceCluster(r *http.Request, c *v1alpha1.Cluster) (*v1alpha1.Cluster, error)
	RemoveCluster(r *http.Request, ns, name string) error
	// CallerConfig is a client configuration that acts as the request's caller.
	CallerConfig(ctx context.Context) (*rest.Config, error)
	// Kept is the answer kept for route, set and query, computed and encoded again with compute
	// only when what the server's caches hold changed since.
	Kept(route, set string, query url.Values, compute func() any) (httpapi.Response, error)
	// Releases are the set's Releases, from the server's watch.
	Releases(ns string) []*v1alpha1.Release
	// HelmStorage are a member's Helm storage Secrets that selector selects, from the server's
	// cache, each summarized by SummarizeHelmSecret.
	HelmStorage(m *multicluster.Member, selector labels.Selector) []*corev1.Secret
}

// Member is what fleet-api's caches say of a member, for its Optikon annotations.
type Member struct {
	// Pods is how many Pods it runs; nil when its caches cannot say.
	Pods *int
	// Ready is its Ready condition's status ("" before it is probed); Synced says its caches
	// are current.
	Ready  string
	Synced bool
}

// API is Optikon's v0 API (its swagger, api/v0/gen/swagger.md of optikon/api) on fleet-api: the
// contract its UI calls, on the SDK. It serves one cluster set for its caller as every native
// route does; its errors are Optikon's APIResponse.
type API struct{ core Core }

// New is Optikon's API on core.
func New(core Core) *API { return &API{core: core} }

// Handler serves the API's routes under /v0, answering a request none takes with a 404 or 405
// in Optikon's form.
func (a *API) Handler() http.Handler {
	return httpapi.WithStatusErrors(httpapi.Mux(a, Routes, Encode), "Optikon's v0 API", Routes, Encode)
}

// APIResponse is Optikon's answer for an error or a write: Code is the HTTP status, as a string.
type APIResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Encode is Optikon's API's encoder: the value as JSON, an error as an APIResponse with the
// error's code and message (the registry's errors with theirs; 422, an invalid body, as the
// contract's 400, the message naming each field).
func Encode(w http.ResponseWriter, r *http.Request, resp httpapi.Response, err error) {
	if err != nil {
		st := httpapi.StatusOf(err)
		code := int(st.Code)
		if code == http.StatusUnprocessableEntity {
			code = http.StatusBadRequest
		}
		httpapi.WriteJSON(w, code, APIResponse{Code: strconv.Itoa(code), Message: st.Message})
		return
	}
	httpapi.WriteAnswer(w, r, resp)
}

// said is a write's answer as Optikon gives it: an APIResponse with code, saying what was done.
func said(code int, format string, args ...any) httpapi.Response {
	return httpapi.Response{Code: code, Body: APIResponse{Code: strconv.Itoa(code), Message: fmt.Sprintf(format, args...)}}
}
