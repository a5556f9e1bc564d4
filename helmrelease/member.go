package helmrelease

import (
	"fmt"
	"sync"

	"helm.sh/helm/v4/pkg/action"
	common "helm.sh/helm/v4/pkg/chart/common"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Member is one member as Helm's operations on it see it: its rest.Config, its discovery and
// REST mapping, and its capabilities, shared by every operation on it. It is safe for concurrent
// use.
type Member struct {
	config    *rest.Config
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.ResettableRESTMapper

	// caps are the member's Kubernetes version and API versions, from discovery, for every
	// operation's Configuration: Helm would otherwise drop the cached discovery and discover
	// again at each install and upgrade.
	capsMu sync.Mutex
	caps   *common.Capabilities
}

// NewMember is the member reached with config. A caller that keeps the member's cached discovery
// and REST mapper already (the releases controller does, for its own applies) passes them, so
// that the member is discovered once for both and told of a change once; nil dc makes both from
// config. A Member is kept while the member is, and its credentials may rotate meanwhile: give it
// a config that sends each request with the member's credentials as they are then
// (multicluster.Member.TransportConfig).
func NewMember(config *rest.Config, dc discovery.CachedDiscoveryInterface, mapper meta.ResettableRESTMapper) (*Member, error) {
	m := &Member{config: rest.CopyConfig(config), discovery: dc, mapper: mapper}
	if dc == nil {
		d, err := discovery.NewDiscoveryClientForConfig(m.config)
		if err != nil {
			return nil, fmt.Errorf("the member's discovery: %w", err)
		}
		m.discovery = memory.NewMemCacheClient(d)
		m.mapper = restmapper.NewDeferredDiscoveryRESTMapper(m.discovery)
	}
	if m.mapper == nil {
		m.mapper = restmapper.NewDeferredDiscoveryRESTMapper(m.discovery)
	}
	return m, nil
}

// capabilities are the member's, discovered once until Invalidate.
func (m *Member) capabilities() (*common.Capabilities, error) {
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

// Getter is the RESTClientGetter of an operation on the member, with namespace as the
// operation's default namespace.
func (m *Member) Getter(namespace string) genericclioptions.RESTClientGetter {
	return &getter{m: m, namespace: namespace}
}

// Invalidate drops what the member's discovery found (the shared discovery and mapper too): its
// next operation discovers again. Call it when the member's API versions changed (a CRD installed
// or removed, an upgrade).
func (m *Member) Invalidate() {
	m.discovery.Invalidate()
	m.mapper.Reset()
	m.capsMu.Lock()
	m.caps = nil
	m.capsMu.Unlock()
}

// getter is one operation's RESTClientGetter: the member's config, its shared discovery and
// mapper, and the operation's namespace.
type getter struct {
	m         *Member
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
