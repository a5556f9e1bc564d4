package simmembers

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

const (
	membersEnv = "CLUSTERREGISTRY_SIM_MEMBERS" // how many, from which index: "count,first"
	latencyEnv = "CLUSTERREGISTRY_SIM_LATENCY"
	keysEnv    = "CLUSTERREGISTRY_SIM_KEYS" // the CA's certificate and key, and the leaf key, shared by every child
	// perChild is the most members one child serves: each takes a listener and a connection, and
	// a process may hold 20,000 files on the machines this runs on.
	perChild = 4000
	// Token is the bearer token every simulated member accepts; ProviderType names a provider
	// that gives it (register one with the Resolver).
	Token        = "sim-token"
	ProviderType = "sim"
)

// Main serves simulated members when this process is a child that Start began, and then returns
// its exit code and true; otherwise it returns at once with false. Call it first in TestMain.
func Main() (code int, child bool) {
	if os.Getenv(membersEnv) == "" {
		return 0, false
	}
	return serve(), true
}

// serve is the child's main: it serves its members, prints their addresses as one JSON line, and
// exits when its standard input closes.
func serve() int {
	var n, first int
	_, err := fmt.Sscanf(os.Getenv(membersEnv), "%d,%d", &n, &first)
	latency, err2 := time.ParseDuration(os.Getenv(latencyEnv))
	k, err3 := decodeKeys(os.Getenv(keysEnv))
	if err != nil || err2 != nil || err3 != nil || n < 1 || first < 0 || first+n > 60000 {
		fmt.Fprintln(os.Stderr, "sim members: bad", membersEnv, latencyEnv, "or", keysEnv)
		return 2
	}
	var servers []string
	for i := first; i < first+n; i++ {
		ip := net.IPv4(127, 1+byte(i/62500), byte(i/250%250), byte(i%250+1))
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: ip.String()},
			IPAddresses: []net.IP{ip}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, k.caCert, &k.leafKey.PublicKey, k.caKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sim members:", err)
			return 1
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "sim members:", err)
			return 1
		}
		m := &member{uid: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)), bound: map[string][]string{},
			applied: appliedStore{objects: map[string]map[string]any{}}}
		config := &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: k.leafKey}},
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				m.handshakes.Add(1)
				return nil, nil
			},
		}
		go serveH2(ln, config, m, latency)
		servers = append(servers, "https://"+ln.Addr().String())
	}
	if err := json.NewEncoder(os.Stdout).Encode(servers); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent is done
	return 0
}

// keys are what every child signs and serves with: one CA, one leaf key.
type keys struct {
	caCert  *x509.Certificate
	caKey   *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey
	caPEM   []byte
}

func newKeys() (*keys, string, error) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sim-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, "", err
	}
	caKeyDER, _ := x509.MarshalECPrivateKey(caKey)
	leafKeyDER, _ := x509.MarshalECPrivateKey(leafKey)
	encoded := strings.Join([]string{base64.StdEncoding.EncodeToString(caDER), base64.StdEncoding.EncodeToString(caKeyDER),
		base64.StdEncoding.EncodeToString(leafKeyDER)}, ",")
	k, err := decodeKeys(encoded)
	return k, encoded, err
}

func decodeKeys(s string) (*keys, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return nil, fmt.Errorf("want 3 keys, got %d", len(parts))
	}
	var der [3][]byte
	for i, p := range parts {
		var err error
		if der[i], err = base64.StdEncoding.DecodeString(p); err != nil {
			return nil, err
		}
	}
	k := &keys{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der[0]})}
	var err error
	if k.caCert, err = x509.ParseCertificate(der[0]); err != nil {
		return nil, err
	}
	if k.caKey, err = x509.ParseECPrivateKey(der[1]); err != nil {
		return nil, err
	}
	k.leafKey, err = x509.ParseECPrivateKey(der[2])
	return k, err
}

// member is one simulated member's state.
type member struct {
	uid        types.UID
	handshakes atomic.Int64
	failing    atomic.Bool

	mu       sync.Mutex
	watchers []*watcher
	version  int64               // the resourceVersion of the latest write
	bindings int64               // how many binding Secrets were made
	bound    map[string][]string // binding Secrets by namespace

	applied appliedStore // what server-side apply clients wrote (applied.go)
	pods    podChurn     // the Pod watches, and the Pods ChurnPath made (churn.go)
}

// ObjectsPerMember is how many ConfigMaps each member serves at /api/v1/configmaps, all in
// namespace default, for benchmarks of watch caches.
const ObjectsPerMember = 100

// SentAnnotation is where a written ConfigMap carries the time (Unix nanoseconds) that
// /debug/write was asked, for measuring event latency.
const SentAnnotation = "sim.clusterregistry.k8s.io/sent"

// asMetadata reports whether a request's Accept asks for metadata only, as client-go's metadata
// client does (as=PartialObjectMetadata or as=PartialObjectMetadataList in group meta.k8s.io).
func asMetadata(accept string) bool {
	return strings.Contains(accept, "as=PartialObjectMetadata")
}

// metadataOf is what a metadata-only client is sent for obj.
func metadataOf(cm *corev1.ConfigMap) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}, ObjectMeta: cm.ObjectMeta}
}

// isWatch reports whether path is an authorised watch of ConfigMaps.
func (m *member) isWatch(path, auth string) bool {
	p, query, _ := strings.Cut(path, "?")
	return authorized(auth) && p == "/api/v1/configmaps" && strings.Contains(query, "watch=true")
}

func (m *member) watch(w *watcher) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watchers = append(m.watchers, w)
}

func (m *member) unwatch(w *watcher) {
	m.applied.unwatch(w)
	m.pods.unwatch(w)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, other := range m.watchers {
		if other == w {
			m.watchers = append(m.watchers[:i], m.watchers[i+1:]...)
			return
		}
	}
}

// write modifies the first ConfigMap, stamped with sent, and sends the event to every watch.
func (m *member) write(sent string) {
	m.mu.Lock()
	m.version++
	cm := simConfigMap(0)
	cm.ResourceVersion = strconv.FormatInt(listVersion+m.version, 10)
	cm.Annotations = map[string]string{SentAnnotation: sent}
	watchers := slices.Clone(m.watchers)
	m.mu.Unlock()
	data, err := runtime.Encode(jsonCodec, cm)
	if err != nil {
		return
	}
	meta, err := json.Marshal(metadataOf(cm))
	if err != nil {
		return
	}
	event := []byte(`{"type":"MODIFIED","object":` + strings.TrimSpace(string(data)) + "}\n")
	metaEvent := []byte(`{"type":"MODIFIED","object":` + string(meta) + "}\n")
	for _, w := range watchers {
		if w.metadata {
			w.send(metaEvent)
		} else {
			w.send(event)
		}
	}
}

// initialEvents are what a watch that asks for them (sendInitialEvents=true, as client-go's
// informers do by default) gets first: an ADDED event per ConfigMap, then the bookmark that ends
// them; as metadata only when the watch asks for that.
func (m *member) initialEvents(path string, metadata bool) []byte {
	if !strings.Contains(path, "sendInitialEvents=true") {
		return nil
	}
	if metadata {
		return []byte(watchLists()[1])
	}
	return []byte(watchLists()[0])
}

// watchLists are the initial events, encoded once: whole ConfigMaps, and their metadata only.
var watchLists = sync.OnceValue(func() [2]string {
	var whole, meta strings.Builder
	for i := range ObjectsPerMember {
		data, _ := runtime.Encode(jsonCodec, simConfigMap(i))
		whole.WriteString(`{"type":"ADDED","object":` + strings.TrimSpace(string(data)) + "}\n")
		data, _ = json.Marshal(metadataOf(simConfigMap(i)))
		meta.WriteString(`{"type":"ADDED","object":` + string(data) + "}\n")
	}
	bookmark := `"metadata":{"resourceVersion":"` + strconv.Itoa(listVersion) + `","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n"
	whole.WriteString(`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1",` + bookmark)
	meta.WriteString(`{"type":"BOOKMARK","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",` + bookmark)
	return [2]string{whole.String(), meta.String()}
})

// listVersion is the resourceVersion of the initial list.
const listVersion = 1000

// simConfigMap is the i-th ConfigMap every member serves: about 400 bytes of data, labelled, and
// with the managed fields a real API server returns for an object written by apply and updated by
// a controller.
func simConfigMap(i int) *corev1.ConfigMap {
	when := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("cm-%03d", i), ResourceVersion: strconv.Itoa(listVersion),
			UID: types.UID(fmt.Sprintf("00000000-0000-0000-0001-%012d", i)), Labels: map[string]string{"app": "sim", "index": strconv.Itoa(i)},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &when, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:config":{}},"f:metadata":{"f:labels":{"f:app":{},"f:index":{}}}}`)},
				{Manager: "sim-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &when, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:sim.clusterregistry.k8s.io/sent":{}}}}`)},
			}},
		Data: map[string]string{"config": strings.Repeat("x", 400)},
	}
}

// lists are the members' ConfigMap list, encoded once: in JSON, in protobuf, and as metadata
// only (in JSON, which the metadata client accepts).
var lists = sync.OnceValue(func() [3]string {
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(listVersion)}}
	meta := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"},
		ListMeta: list.ListMeta}
	for i := range ObjectsPerMember {
		list.Items = append(list.Items, *simConfigMap(i))
		meta.Items = append(meta.Items, *metadataOf(simConfigMap(i)))
	}
	_, _, js := encode("", list)
	_, _, pb := encode(runtime.ContentTypeProtobuf, list)
	metaJSON, _ := json.Marshal(meta)
	return [3]string{js, pb, string(metaJSON)}
})

// answerBody answers a Rotator's requests (tokens.go), GET /readyz and /healthz (failing, once /debug/fail was asked, as an API server
// whose etcd is gone), /version, the kube-system namespace, a GET or server-side apply of a
// namespaced ConfigMap (in protobuf when the client accepts it, as API servers do), and the debug
// paths: /debug/handshakes with the member's TLS handshake count, /debug/cpu with this process's
// CPU time in microseconds, /debug/fail and /debug/recover. The server sends answers other than
// debug ones after the latency. reqBody is the request's body, for server-side applies (applied.go).
func (m *member) answerBody(method, path, auth, accept string, reqBody []byte) (status int, contentType, body string) {
	const json = "application/json"
	if !authorized(auth) {
		return http.StatusUnauthorized, json, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`
	}
	full := path
	path, query, _ := strings.Cut(path, "?")
	if status, contentType, body, ok := m.tokens(method, path, query); ok {
		return status, contentType, body
	}
	switch {
	case path == "/debug/handshakes":
		return http.StatusOK, "text/plain", strconv.FormatInt(m.handshakes.Load(), 10)
	case path == "/debug/cpu":
		return http.StatusOK, "text/plain", strconv.FormatInt(ProcessCPU().Microseconds(), 10)
	case path == "/debug/write":
		sent := ""
		if _, q, ok := strings.Cut(full, "?t="); ok {
			sent = q
		}
		m.write(sent)
		return http.StatusOK, "text/plain", "0"
	case path == ChurnPath:
		m.pods.churn()
		return http.StatusOK, "text/plain", "0"
	case path == "/debug/applies":
		return http.StatusOK, "text/plain", strconv.FormatInt(m.applied.count(), 10)
	case path == "/debug/lastapply":
		return http.StatusOK, "text/plain", strconv.FormatInt(m.applied.lastApplied(), 10)
	case path == "/debug/drift":
		return http.StatusOK, "text/plain", strconv.Itoa(m.applied.drift())
	case path == "/debug/corrections":
		return http.StatusOK, "text/plain", m.applied.correctionTimes()
	case path == "/api/v1/configmaps" && strings.Contains(query, "labelSelector="):
		return m.applied.list()
	case path == "/api/v1/configmaps":
		if asMetadata(accept) {
			return http.StatusOK, json, lists()[2]
		}
		if strings.HasPrefix(accept, runtime.ContentTypeProtobuf) {
			return http.StatusOK, runtime.ContentTypeProtobuf, lists()[1]
		}
		return http.StatusOK, json, lists()[0]
	case workloadList(path) != "":
		return http.StatusOK, json, workloadList(path)
	case path == "/debug/fail", path == "/debug/recover":
		m.failing.Store(path == "/debug/fail")
		return http.StatusOK, "text/plain", "0"
	case path == "/readyz", path == "/healthz":
		if m.failing.Load() {
			return http.StatusInternalServerError, "text/plain", "[+]ping ok\n[-]etcd failed: reason withheld\n" + path[1:] + " check failed\n"
		}
		return http.StatusOK, "text/plain", "ok"
	case path == "/api":
		return http.StatusOK, json, `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}`
	case path == "/apis":
		return http.StatusOK, json, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`
	case path == "/api/v1":
		return http.StatusOK, json, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[` +
			`{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["get","list","watch"]},` +
			`{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["get","list","watch"]}]}`
	case path == "/version":
		return http.StatusOK, json, `{"major":"1","minor":"36","gitVersion":"v1.36.3"}`
	case path == "/api/v1/namespaces/kube-system":
		return encode(accept, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: m.uid}})
	case strings.HasPrefix(path, "/api/v1/namespaces/") && strings.Contains(path, "/configmaps/"):
		parts := strings.Split(path, "/")
		if method == http.MethodPatch && reqBody != nil {
			return m.applied.apply(parts[4], parts[6], query, reqBody)
		}
		if status, contentType, body, ok := m.applied.get(parts[4], parts[6]); ok && method == http.MethodGet {
			return status, contentType, body
		}
		return encode(accept, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: parts[4], Name: parts[6]}, Data: map[string]string{"k": "v"}})
	}
	return http.StatusNotFound, json, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`
}

// encode answers with obj in protobuf when the client accepts it, as API servers do, or JSON.
func encode(accept string, obj runtime.Object) (int, string, string) {
	var codec runtime.Encoder = jsonCodec
	contentType := runtime.ContentTypeJSON
	if strings.HasPrefix(accept, runtime.ContentTypeProtobuf) {
		codec, contentType = protobufCodec, runtime.ContentTypeProtobuf
	}
	data, err := runtime.Encode(codec, obj)
	if err != nil {
		return http.StatusInternalServerError, runtime.ContentTypeJSON, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`
	}
	return http.StatusOK, contentType, string(data)
}

var (
	protobufCodec = clientgoscheme.Codecs.EncoderForVersion(
		protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme), corev1.SchemeGroupVersion)
	jsonCodec = clientgoscheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion)
)

// Members is the parent's handle on a child serving simulated members.
type Members struct {
	CA      []byte
	Servers []string
}

// Start starts child processes serving n simulated members that answer after latency, and stops
// them when the test ends.
func Start(tb testing.TB, n int, latency time.Duration) *Members {
	tb.Helper()
	k, encoded, err := newKeys()
	if err != nil {
		tb.Fatal(err)
	}
	out := &Members{CA: k.caPEM}
	for first := 0; first < n; first += perChild {
		count := min(perChild, n-first)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", membersEnv, count, first), latencyEnv+"="+latency.String(), keysEnv+"="+encoded)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			tb.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			_ = stdin.Close()
			_ = cmd.Wait()
		})
		var servers []string
		line, err := bufio.NewReader(stdout).ReadBytes('\n')
		if err != nil || json.Unmarshal(line, &servers) != nil || len(servers) != count {
			tb.Fatalf("simulated members did not start: %v", err)
		}
		out.Servers = append(out.Servers, servers...)
	}
	return out
}

// Clusters are Clusters in namespace for the simulated members, authenticated by ProviderType.
func (s *Members) Clusters(namespace string) []v1alpha1.Cluster {
	out := make([]v1alpha1.Cluster, len(s.Servers))
	for i, server := range s.Servers {
		out[i] = v1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("member-%05d", i)},
			Spec: v1alpha1.ClusterSpec{
				KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
					ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: server}},
					CABundle:        s.CA,
				},
				AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{
					{Name: "sim", Type: v1alpha1.AuthProviderType{Name: ProviderType}}}},
			},
		}
	}
	return out
}

// ProcessCPU is the CPU time this process has used, user and system.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
