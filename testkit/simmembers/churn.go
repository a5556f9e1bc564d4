package simmembers

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ChurnPath, asked of a member (GET, authenticated: Members.Client), makes a Pod there and
// deletes the one it made before, and sends both events to the member's Pod watches: Pods coming
// and going, as a member's Deployments roll, while what the Pods request moves by one Pod at
// most (100m of cpu, 256Mi of memory).
const ChurnPath = "/debug/churn"

// podChurn is a member's Pod watches and the Pods ChurnPath made.
type podChurn struct {
	mu       sync.Mutex
	watchers []*watcher
	made     int
}

// isPodWatch reports whether path is a watch of the member's Pods.
func isPodWatch(path string) bool {
	p, _, _ := strings.Cut(path, "?")
	return p == "/api/v1/pods"
}

func (p *podChurn) watch(w *watcher) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watchers = append(p.watchers, w)
}

func (p *podChurn) unwatch(w *watcher) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watchers = slices.DeleteFunc(p.watchers, func(o *watcher) bool { return o == w })
}

// churn makes Pod churn-N and deletes churn-(N-1), and tells the watches.
func (p *podChurn) churn() {
	p.mu.Lock()
	p.made++
	n := p.made
	watchers := slices.Clone(p.watchers)
	p.mu.Unlock()
	// Past the list's resourceVersion (1), two for each call.
	events := []byte(podEvent("ADDED", churnPod(n, int64(2*n)+100)))
	if n > 1 {
		events = append(events, podEvent("DELETED", churnPod(n-1, int64(2*n)+101))...)
	}
	for _, w := range watchers {
		w.send(events)
	}
}

// churnPod is the nth Pod churn makes, at resourceVersion rv: Running on node-a, asking what
// the fixed Pods ask.
func churnPod(n int, rv int64) *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: HelmNamespace, Name: "churn-" + itoa(n), ResourceVersion: strconv.FormatInt(rv, 10)},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.2.0",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// podEvent is a watch event of pod, a line of JSON.
func podEvent(typ string, pod *corev1.Pod) string {
	data, _ := runtime.Encode(jsonCodec, pod)
	return `{"type":"` + typ + `","object":` + strings.TrimSpace(string(data)) + "}\n"
}

// Client is an HTTP client of the members, trusting their CA and authenticated as they want: for
// their /debug/ paths (ChurnPath).
func (s *Members) Client() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CA)
	return &http.Client{Transport: &bearer{&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}}
}

type bearer struct{ rt http.RoundTripper }

func (t *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+Token)
	return t.rt.RoundTrip(r)
}
