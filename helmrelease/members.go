package helmrelease

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"helm.sh/helm/v4/pkg/action"
	common "helm.sh/helm/v4/pkg/chart/common"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Members keeps each member's discovery and REST mapping, shared by every operation on it. It
// is safe for concurrent use.
type Members struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*member
}

type member struct {
	config    *rest.Config
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.ResettableRESTMapper
	// discoveries counts the member's full discoveries (its GET /apis).
	discoveries atomic.Int64

	// caps are the member's Kubernetes version and API versions, from discovery, for every
	// operation's Configuration: Helm would otherwise drop the cached discovery and discover
	// again at each install and upgrade.
	capsMu sync.Mutex
	caps   *common.Capabilities
}

// capabilities are the member's, discovered once until Invalidate.
func (m *member) capabilities() (*common.Capabilities, error) {
	m.capsMu.Lock()
	defer m.capsMu.Unlock()
	if m.caps == nil {
		v, err := m.discovery.ServerVersion()
		if err != nil {
			return nil, fmt.Errorf("reading the member's Kubernetes version: %w", err)
		}
		apis, err := action.GetVersionSet(m.discovery)
		if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
			return nil, fmt.Errorf("discovering the member's API versions: %w", err)
		}
		m.caps = &common.Capabilities{APIVersions: apis, HelmVersion: common.DefaultCapabilities.HelmVersion,
			KubeVersion: common.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor}}
	}
	c := *m.caps
	return &c, nil
}

// NewMembers makes an empty Members.
func NewMembers() *Members { return &Members{m: map[types.NamespacedName]*member{}} }

// Getter is the RESTClientGetter of an operation on the member name, whose rest.Config is config
// (taken once per member: a new config, such as rotated credentials, is a new member for Members
// after Forget), with namespace as the operation's default namespace.
func (ms *Members) Getter(name types.NamespacedName, config *rest.Config, namespace string) (genericclioptions.RESTClientGetter, error) {
	m, err := ms.member(name, config)
	if err != nil {
		return nil, err
	}
	return &getter{m: m, namespace: namespace}, nil
}

// Invalidate drops what the member's discovery found: its next operation discovers again. Call
// it when the member's API versions changed (a CRD installed or removed, an upgrade).
func (ms *Members) Invalidate(name types.NamespacedName) {
	ms.mu.Lock()
	m := ms.m[name]
	ms.mu.Unlock()
	if m != nil {
		m.discovery.Invalidate()
		m.mapper.Reset()
		m.capsMu.Lock()
		m.caps = nil
		m.capsMu.Unlock()
	}
}

// Forget drops the member: its next operation starts from its config again.
func (ms *Members) Forget(name types.NamespacedName) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	delete(ms.m, name)
}

// Discoveries is how many full discoveries (the member's /api and /apis) Members has made of the
// member name.
func (ms *Members) Discoveries(name types.NamespacedName) int64 {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m := ms.m[name]; m != nil {
		return m.discoveries.Load()
	}
	return 0
}

func (ms *Members) member(name types.NamespacedName, config *rest.Config) (*member, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m := ms.m[name]; m != nil {
		return m, nil
	}
	m := &member{config: rest.CopyConfig(config)}
	counting := rest.CopyConfig(config)
	counting.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.TrimSuffix(req.URL.Path, "/") == "/apis" {
				m.discoveries.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	dc, err := discovery.NewDiscoveryClientForConfig(counting)
	if err != nil {
		return nil, err
	}
	m.discovery = memory.NewMemCacheClient(dc)
	m.mapper = restmapper.NewDeferredDiscoveryRESTMapper(m.discovery)
	ms.m[name] = m
	return m, nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// getter is one operation's RESTClientGetter: the member's config, its shared discovery and
// mapper, and the operation's namespace.
type getter struct {
	m         *member
	namespace string
}

func (g *getter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.m.config), nil }
func (g *getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.m.discovery, nil
}
func (g *getter) ToRESTMapper() (meta.RESTMapper, error) { return g.m.mapper, nil }
func (g *getter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return &namespaceConfig{config: g.m.config, namespace: g.namespace}
}

// namespaceConfig is the kubeconfig loader Helm asks for the default namespace: it holds no
// kubeconfig, and hands out the member's config.
type namespaceConfig struct {
	config    *rest.Config
	namespace string
}

func (c *namespaceConfig) RawConfig() (clientcmdapi.Config, error) { return clientcmdapi.Config{}, nil }
func (c *namespaceConfig) ClientConfig() (*rest.Config, error)     { return rest.CopyConfig(c.config), nil }
func (c *namespaceConfig) Namespace() (string, bool, error)        { return c.namespace, true, nil }
func (c *namespaceConfig) ConfigAccess() clientcmd.ConfigAccess {
	return clientcmd.NewDefaultClientConfigLoadingRules()
}
