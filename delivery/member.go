package delivery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/helmrelease"
	"github.com/cluster-registry/sdk/internal/safetext"
	"github.com/cluster-registry/sdk/multicluster"
)

// ref names one applied object on a member.
type ref struct {
	GVR       schema.GroupVersionResource
	Kind      string
	Namespace string
	Name      string
}

func (r ref) String() string {
	gk := schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s", gk, r.Name)
	}
	return fmt.Sprintf("%s %s/%s", gk, r.Namespace, r.Name)
}

// applied is one object as the Controller last applied it to a member, and how it stands there.
type applied struct {
	ref ref
	// fields is the field manager's fieldsV1 entry in the apply's answer: a change to it on the
	// member (another writer took a field) is drift.
	fields string
	// status and message are its kstatus, from the apply's answer, then from the watch.
	status  string
	message string
	// gone: the watch saw it deleted.
	gone bool
	// uid is the object's UID in the apply's answer: events of another incarnation are not its.
	uid types.UID
	// resourceVersion is the apply's answer's: the watch's events older than it are not news.
	resourceVersion string
	// feedback are the values spec.feedback read from it, by name.
	feedback map[string]string
}

// memberClients are what the Controller keeps per member, for its applies and Helm mode's
// operations alike: a dynamic client, and one discovery and REST mapper, cached until a kind is
// not found or the member's Kubernetes version changes. They are built on the member's
// TransportConfig, so each request carries its credentials as they are then: a rotation needs no
// rebuild.
type memberClients struct {
	member *multicluster.Member
	// host is the member's server they were built for: an edited endpoint is a rebuild.
	host   string
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	helm   *helmrelease.Member
	// version is the member's Kubernetes version when last used.
	version string
}

// clientsCache keeps each member's memberClients.
type clientsCache struct {
	mu     sync.Mutex
	byName map[types.NamespacedName]*memberClients
}

func (c *clientsCache) get(ctx context.Context, m *multicluster.Member) (*memberClients, error) {
	cfg, err := m.Config(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	mc := c.byName[m.Name()]
	if mc == nil || mc.member != m || mc.host != cfg.Host {
		if mc, err = newMemberClients(ctx, m, cfg.Host); err != nil {
			return nil, err
		}
		if c.byName == nil {
			c.byName = map[types.NamespacedName]*memberClients{}
		}
		c.byName[m.Name()] = mc
	}
	// A member whose Kubernetes version changed (an upgrade, as health reports it) may serve other
	// API versions: its discovery is asked again, once.
	if v := m.Cluster().Status.Version; v != "" && v != mc.version {
		if mc.version != "" {
			mc.helm.Invalidate()
		}
		mc.version = v
	}
	return mc, nil
}

func newMemberClients(ctx context.Context, m *multicluster.Member, host string) (*memberClients, error) {
	cfg, err := m.TransportConfig(ctx)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	helm, err := helmrelease.NewMember(cfg, cached, mapper)
	if err != nil {
		return nil, err
	}
	return &memberClients{member: m, host: host, dyn: dyn, mapper: mapper, helm: helm}, nil
}

// forget drops the member's clients: its next use builds them again.
func (c *clientsCache) forget(m *multicluster.Member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mc := c.byName[m.Name()]; mc != nil && mc.member == m {
		delete(c.byName, m.Name())
	}
}

// mapping finds an object's resource on the member, asking discovery again once when the member
// does not serve the kind as last discovered (a CRD applied meanwhile).
func (mc *memberClients) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := mc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		mc.mapper.Reset()
		m, err = mc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// notServedError: the member does not serve an object's kind.
type notServedError struct{ gvk schema.GroupVersionKind }

func (e *notServedError) Error() string { return fmt.Sprintf("the member does not serve %s", e.gvk) }

// memberError is why a member's delivery failed: a failure class and the member's words.
type memberError struct {
	class  string
	object string
	err    error
}

func (e *memberError) Error() string {
	if e.object == "" {
		return e.err.Error()
	}
	return e.object + ": " + e.err.Error()
}

// classify sorts a member's error into a failure class.
func classify(ctx context.Context, err error) string {
	var netErr net.Error
	var notServed *notServedError
	switch {
	case errors.As(err, &notServed):
		return v1alpha1.FailureInvalid
	case errors.Is(err, access.ErrNoUsableProvider) || errors.Is(err, access.ErrUnpinnedSecret) || errors.Is(err, access.ErrNotAllowed) ||
		errors.Is(err, access.ErrUnknownProviderType):
		// The trust policy's refusal, or credentials that do not resolve: no retry reaches the
		// member until its Cluster, its Secret or the controller's trust flags change.
		return v1alpha1.FailureCredentialsUnavailable
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return v1alpha1.FailureTimeout
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return v1alpha1.FailureForbidden
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return v1alpha1.FailureConflict
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) || meta.IsNoMatchError(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) || apierrors.IsRequestEntityTooLargeError(err):
		return v1alpha1.FailureInvalid
	case errors.As(err, &netErr) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err):
		return v1alpha1.FailureUnreachable
	}
	// Any other answer is the member's refusal (a 500 among them: a server-side apply of a field
	// of the wrong type fails with one), not a member out of reach.
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch status.Status().Code {
		case 502, 503, 504:
			return v1alpha1.FailureUnreachable
		}
		return v1alpha1.FailureInvalid
	}
	return v1alpha1.FailureUnreachable
}

// message is an error as status shows it: one line, escaped, cut.
func message(err error) string { return safetext.OneLine(err.Error(), 1024) }

// applyOne applies one object to a member: its namespace defaulted where the member says the
// kind is namespaced, forced only when the object is already the Release's (else a field another
// writer owns is a Conflict, so that an object nobody gave the Release is not taken over).
func (mc *memberClients) applyOne(ctx context.Context, u *unstructured.Unstructured, defaultNS, manager string, owned func(ref) bool, rules objectRules) (applied, error) {
	gvk := u.GroupVersionKind()
	m, err := mc.mapping(gvk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			err = &notServedError{gvk: gvk}
		}
		return applied{}, err
	}
	obj := u.DeepCopy()
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(defaultNS)
		}
	} else {
		obj.SetNamespace("")
	}
	r := ref{GVR: m.Resource, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	var ri dynamic.ResourceInterface = mc.dyn.Resource(m.Resource)
	if r.Namespace != "" {
		ri = mc.dyn.Resource(m.Resource).Namespace(r.Namespace)
	}
	out, err := ri.Apply(ctx, r.Name, obj, metav1.ApplyOptions{FieldManager: manager, Force: owned(r)})
	if err != nil {
		return applied{ref: r}, err
	}
	a := applied{ref: r, fields: managerFields(out, manager), uid: out.GetUID(), resourceVersion: out.GetResourceVersion()}
	a.status, a.message = rules.health.judge(out)
	a.feedback = readFeedback(rules.feedback, out)
	return a, nil
}

// deleteOne deletes one object from a member, in the background (its dependents after it), if it
// still carries the Release's labels: a Release removes only what is its own.
func (mc *memberClients) deleteOne(ctx context.Context, r ref, release string, namespace string) error {
	var ri dynamic.ResourceInterface = mc.dyn.Resource(r.GVR)
	if r.Namespace != "" {
		ri = mc.dyn.Resource(r.GVR).Namespace(r.Namespace)
	}
	cur, err := ri.Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if l := cur.GetLabels(); l[v1alpha1.ReleaseLabel] != release || l[v1alpha1.ReleaseNamespaceLabel] != namespace {
		return nil // someone else's now
	}
	uid := cur.GetUID()
	policy := metav1.DeletePropagationBackground
	err = ri.Delete(ctx, r.Name, metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// managerFields is manager's Apply entry of an object's managed fields, as a string to compare.
func managerFields(u *unstructured.Unstructured, manager string) string {
	for _, e := range u.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil {
			return e.FieldsV1.GetRawString()
		}
	}
	return ""
}

// sortedRefs is refs in removal order: the reverse of apply order.
func removalOrder(refs []ref) []ref {
	out := slices.Clone(refs)
	slices.SortStableFunc(out, func(a, b ref) int {
		return ApplyOrder(schema.GroupKind{Group: b.GVR.Group, Kind: b.Kind}) - ApplyOrder(schema.GroupKind{Group: a.GVR.Group, Kind: a.Kind})
	})
	return out
}
