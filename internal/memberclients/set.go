package memberclients

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Set is one member's clients on one config and HTTP client. Each kind is built on first use, so
// a member whose callers use only a clientset holds no other client; a failed build is tried
// again at the next call. It is safe for concurrent use.
type Set struct {
	config *rest.Config
	http   *http.Client
	scheme *runtime.Scheme

	mu   sync.Mutex
	kube kubernetes.Interface
	dyn  dynamic.Interface
	meta metadata.Interface
	crc  client.Client
}

// New returns the Set of clients on config and httpClient; scheme is the controller-runtime
// client's. The Set keeps config as it is: callers must not change it afterwards.
func New(config *rest.Config, httpClient *http.Client, scheme *runtime.Scheme) *Set {
	return &Set{config: config, http: httpClient, scheme: scheme}
}

// Kubernetes is a clientset that speaks protobuf, as Kubernetes' own controllers do: every
// built-in type has a protobuf form, which costs a fraction of JSON's CPU to decode. Apply
// patches are sent as they are, and answers come in JSON from servers that prefer it.
func (s *Set) Kubernetes() (kubernetes.Interface, error) {
	return lazy(s, &s.kube, func() (kubernetes.Interface, error) {
		return kubernetes.NewForConfigAndClient(Protobuf(s.config), s.http)
	})
}

// Dynamic is a dynamic client.
func (s *Set) Dynamic() (dynamic.Interface, error) {
	return lazy(s, &s.dyn, func() (dynamic.Interface, error) { return dynamic.NewForConfigAndClient(s.config, s.http) })
}

// Metadata is a metadata-only client.
func (s *Set) Metadata() (metadata.Interface, error) {
	return lazy(s, &s.meta, func() (metadata.Interface, error) { return metadata.NewForConfigAndClient(s.config, s.http) })
}

// Client is a controller-runtime client with the Set's scheme. It discovers the member's API
// lazily, on first use of each kind.
func (s *Set) Client() (client.Client, error) {
	return lazy(s, &s.crc, func() (client.Client, error) {
		return client.New(s.config, client.Options{HTTPClient: s.http, Scheme: s.scheme})
	})
}

// Protobuf is a copy of config that sends and prefers protobuf, falling back to JSON.
func Protobuf(config *rest.Config) *rest.Config {
	c := rest.CopyConfig(config)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// lazy returns *slot, building it first if it is empty.
func lazy[C comparable](s *Set, slot *C, build func() (C, error)) (C, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero C
	if *slot != zero {
		return *slot, nil
	}
	c, err := build()
	if err != nil {
		return zero, err
	}
	*slot = c
	return c, nil
}
