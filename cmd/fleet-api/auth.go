package main

import (
	"context"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/callerauth"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
)

// decisionTTL is how long the registry's answers about a caller are kept: who a token is
// (TokenReview) and what they may do (SubjectAccessReview), as kube-rbac-proxy and aggregated
// API servers keep them. A revoked token or permission still works for reads this long; writes
// are carried out as the caller (impersonation), so the registry refuses them at once.
const decisionTTL = 10 * time.Second

// guard makes every request its caller's: it authenticates the caller as the registry would
// (a bearer token, checked by the registry's TokenReview; a client certificate when serving TLS
// with a client CA), refuses requests for host names it does not serve and state-changing requests
// a cross-site page could send, and decides what the caller may see by asking the registry
// (SubjectAccessReview). Nothing ambient counts: no cookie, origin or address.
type guard struct {
	authn authenticator.Request
	authz authorizer.Authorizer
	// hosts are the Host header values it answers to: a page served from another name (a DNS
	// rebinding) gets nothing.
	hosts map[string]bool
	// registry is the server's config of the registry; writes go through it as the caller.
	registry *rest.Config
	// decisions reads PlacementDecisions with the server's identity: a rollout's waves.
	decisions cpversioned.Interface
	// origins are the origins whose pages may call the API from a browser (cors.go).
	origins map[string]bool
}

// newGuard asks the registry reached by registry about callers. clientCA, when not empty, is a
// PEM bundle of the CAs whose client certificates identify callers (by their common name and
// organizations, as the registry's own x509 authentication does).
func newGuard(registry *rest.Config, clientCA []byte, hosts []string) (*guard, error) {
	kube, err := kubernetes.NewForConfig(registry)
	if err != nil {
		return nil, err
	}
	checker, err := callerauth.New(kube, callerauth.Options{ClientCA: clientCA, CacheTTL: decisionTTL})
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	decisions, err := cpversioned.NewForConfig(registry)
	if err != nil {
		return nil, err
	}
	authn, authz := checker.Authenticator, checker.Authorizer
	g := &guard{authn: authn, authz: authz, hosts: map[string]bool{}, registry: registry, decisions: decisions}
	for _, h := range hosts {
		g.hosts[strings.ToLower(h)] = true
	}
	return g, nil
}

// servedHosts are the Host header values a server listening on addr answers to: the address
// itself, and for a loopback address, localhost and the loopback addresses at the same port;
// extra names (a DNS name, a load balancer's) are added by --allowed-host.
func servedHosts(addr net.Addr, extra []string) []string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return extra
	}
	hosts := []string{net.JoinHostPort(host, port)}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			hosts = append(hosts, net.JoinHostPort(h, port))
		}
	}
	for _, h := range extra {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, port)
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// servedOnly lets through only requests for a host name the server serves: a page behind a DNS
// name that an attacker rebinds to this server's address reaches it with that name as its Host.
// Every answer also tells browsers not to frame it, sniff it or leak its address.
func (g *guard) servedOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if !g.hosts[strings.ToLower(r.Host)] {
			// A page of an allowed origin, behind a proxy that passes its own Host on, is told
			// why in words it can read: its preflight is answered (it carries no credentials and
			// does nothing) and the refusal is readable by that origin. Another origin's page (a
			// rebound DNS name's) still reads nothing.
			if g.answerCORS(w, r) {
				return
			}
			encoderFor(r)(w, r, response{}, apierrors.NewBadRequest(fmt.Sprintf("this server does not serve host %q; give --allowed-host to serve it", r.Host)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticated lets through only requests of an authenticated caller, not sent by a cross-site
// page; the caller is in the request's context (genericrequest.UserFrom). encode writes each
// refusal in the form of the API next serves.
func (g *guard) authenticated(encode httpapi.Encoder, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := g.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			// Nothing about the fleet, nor why the credentials failed, to a caller who is nobody.
			w.Header().Set("WWW-Authenticate", `Bearer realm="fleet-api"`)
			encode(w, r, response{}, apierrors.NewUnauthorized("Unauthorized: send a bearer token the registry accepts (Authorization: Bearer ...)"))
			return
		}
		// A browser may hold credentials that it sends by itself (a client certificate), so a
		// caller's request may still be another site's doing.
		if why := g.crossSite(r); why != "" {
			encode(w, r, response{}, apierrors.NewForbidden(clusterResource, "", fmt.Errorf("%s", why)))
			return
		}
		if why := unsupportedMediaType(r); why != "" {
			encode(w, r, response{}, httpapi.StatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, why))
			return
		}
		next.ServeHTTP(w, r.WithContext(genericrequest.WithUser(r.Context(), resp.User)))
	})
}

// crossSite says why r could have been sent by a page of another site, or "": a browser marks
// its requests (Sec-Fetch-Site, Origin). A page of an origin --cors-allowed-origin names is not
// another site's. A state-changing request must also carry JSON (unsupportedMediaType), which a
// cross-site form cannot send without a preflight; Optikon's chart upload, a form, is let
// through only from this server's pages or an allowed origin's, which a browser always names.
func (g *guard) crossSite(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if g.originAllowed(origin) {
		return ""
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return "a request from another site's page is refused"
	}
	if origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !g.hosts[strings.ToLower(u.Host)] {
			return fmt.Sprintf("a request from origin %q is refused: it is not a page of this server (give --cors-allowed-origin to allow one)", origin)
		}
	}
	return ""
}

// unsupportedMediaType says why r's body is of a type this server does not take (415), or "".
// It is a defence against cross-site pages too: a cross-site form may POST a simple body (a
// form, plain text), while PUT, PATCH and DELETE, and a body of JSON, always need a preflight,
// which this server never answers.
func unsupportedMediaType(r *http.Request) string {
	if r.Method != http.MethodPost && r.Method != http.MethodPut && r.Method != http.MethodPatch {
		return ""
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType == "multipart/form-data" && strings.HasPrefix(r.URL.Path, "/v0/releases") {
		return "" // Optikon's chart upload, a form: crossSite refuses it from any page not allowed
	}
	if mediaType != "application/json" && mediaType != "application/merge-patch+json" {
		return fmt.Sprintf("a %s must have Content-Type application/json (or application/merge-patch+json for PATCH)", r.Method)
	}
	return ""
}

// allowed reports whether the caller of ctx may do verb on Clusters of namespace (name "" for
// all of them), as the registry's RBAC says.
func (g *guard) allowed(ctx context.Context, verb, namespace, name string) (bool, string, error) {
	return g.allowedOn(ctx, "clusters", verb, namespace, name)
}

// allowedOn is allowed for another resource of the registry's group (releases, for /charts).
func (g *guard) allowedOn(ctx context.Context, resource, verb, namespace, name string) (bool, string, error) {
	u, ok := genericrequest.UserFrom(ctx)
	if !ok {
		return false, "no caller", nil
	}
	decision, reason, err := g.authz.Authorize(ctx, authorizer.AttributesRecord{
		User: u, Verb: verb, Namespace: namespace, Name: name, ResourceRequest: true,
		APIGroup: v1alpha1.GroupName, APIVersion: v1alpha1.SchemeGroupVersion.Version, Resource: resource,
	})
	return decision == authorizer.DecisionAllow, reason, err
}

// asCaller is a client of the registry that acts as the caller of ctx (impersonation): the
// registry decides, and its audit log names the caller, with the server as the impersonator.
func (g *guard) asCaller(ctx context.Context) (versioned.Interface, error) {
	cfg, err := g.callerConfig(ctx)
	if err != nil {
		return nil, err
	}
	return versioned.NewForConfig(cfg)
}

// callerConfig is the server's config of the registry, impersonating the caller of ctx.
func (g *guard) callerConfig(ctx context.Context) (*rest.Config, error) {
	u, ok := genericrequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no caller")
	}
	cfg := rest.CopyConfig(g.registry)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: u.GetName(), UID: u.GetUID(), Groups: withoutAuthenticated(u.GetGroups()), Extra: passedExtras(u.GetExtra())}
	return cfg, nil
}

// impersonatedExtras are the keys of a caller's extra information that fleet-api passes on when it
// acts as the caller: those a service account's bound token carries (which token, and the Pod and
// Node it is bound to), so that the registry's audit log and any authorizer that reads them see
// them as they would for the caller's own request. The registry checks impersonation of each key
// on its own (userextras/KEY), and fleet-api's ClusterRole grants exactly these
// (deploy/fleet-api/clusterrole.yaml); an extra of another kind (an authentication webhook's or an
// OIDC claim's) is not passed on: RBAC never reads extras, and impersonating a key the role does
// not grant would refuse the caller's every request.
var impersonatedExtras = []string{
	user.CredentialIDKey,
	serviceaccount.PodNameKey, serviceaccount.PodUIDKey,
	serviceaccount.NodeNameKey, serviceaccount.NodeUIDKey,
}

// passedExtras are the caller's extras that impersonatedExtras names.
func passedExtras(extra map[string][]string) map[string][]string {
	var out map[string][]string
	for _, k := range impersonatedExtras {
		if v, ok := extra[k]; ok {
			if out == nil {
				out = map[string][]string{}
			}
			out[k] = v
		}
	}
	return out
}

// withoutAuthenticated drops system:authenticated, which the registry adds to every impersonated
// user itself.
func withoutAuthenticated(groups []string) []string {
	var out []string
	for _, g := range groups {
		if g != user.AllAuthenticated {
			out = append(out, g)
		}
	}
	return out
}
