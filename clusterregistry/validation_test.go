package clusterregistry_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	clusterregistryv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// plantedSecret stands for a credential someone pasted where it does not belong. Neither the server
// nor ValidateCluster may repeat it back.
const plantedSecret = "pl4nted-S3cret-9f2c1b"

// Every server-side rule rejects its bad input with the field in the error, and ValidateCluster
// rejects the same input on the same field, so clients can check before they send.
func TestServerValidationMatchesValidateCluster(t *testing.T) {
	ns := newNamespace(t)
	clusters := registryClient(t).ClusterregistryV1alpha1().Clusters(ns)
	for i, tt := range rejectedClusters {
		t.Run(tt.name, func(t *testing.T) { checkRejected(t, clusters, i, tt) })
	}
	for i, tt := range acceptedClusters {
		t.Run("accepts "+tt.name, func(t *testing.T) {
			c := newCluster("good-" + strconv.Itoa(i))
			tt.mutate(c)
			if errs := v1alpha1.ValidateCluster(c); len(errs) != 0 {
				t.Errorf("ValidateCluster() = %v", errs)
			}
			if _, err := clusters.Create(testContext(t), c, metav1.CreateOptions{}); err != nil {
				t.Errorf("server rejected it: %v", err)
			}
		})
	}
}

// setAddress, setCIDR, setConfig, addEndpoint and addProvider change a Cluster made by newCluster.
func setAddress(addr string) func(*v1alpha1.Cluster) {
	return func(c *v1alpha1.Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = addr }
}
func setCIDR(cidr string) func(*v1alpha1.Cluster) {
	return func(c *v1alpha1.Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ClientCIDR = cidr }
}
func setConfig(k, v string) func(*v1alpha1.Cluster) {
	return func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.Providers[0].Config[k] = v }
}
func addEndpoint(cidr string) func(*v1alpha1.Cluster) {
	return func(c *v1alpha1.Cluster) {
		c.Spec.KubernetesAPIEndpoints.ServerEndpoints = append(c.Spec.KubernetesAPIEndpoints.ServerEndpoints,
			v1alpha1.ServerAddressByClientCIDR{ClientCIDR: cidr, ServerAddress: "10.0.0.1:6443"})
	}
}
func addProvider(name, typ string) func(*v1alpha1.Cluster) {
	return func(c *v1alpha1.Cluster) {
		c.Spec.AuthInfo.Providers = append(c.Spec.AuthInfo.Providers,
			v1alpha1.AuthProviderConfig{Name: name, Type: v1alpha1.AuthProviderType{Name: typ}})
	}
}

const (
	endpoint0 = "spec.kubernetesApiEndpoints.serverEndpoints[0]"
	provider0 = "spec.authInfo.providers[0]"
)

// rejectedCluster is a change to a valid Cluster that ValidateCluster and the server both refuse.
type rejectedCluster struct {
	name   string
	mutate func(*v1alpha1.Cluster)
	field  string // as the server names it; ValidateCluster names it or a field inside it
	says   string // when set, both errors say this (the key at fault, for config)
}

// rejectedClusters are what ValidateCluster and the server both refuse, each naming the field.
var rejectedClusters = []rejectedCluster{
	{"long displayName", func(c *v1alpha1.Cluster) { c.Spec.DisplayName = strings.Repeat("d", 257) }, "spec.displayName", ""},
	{"clientCIDR not a CIDR", setCIDR("10.0.0.300/8"), endpoint0 + ".clientCIDR", ""},
	{"clientCIDR bare address", setCIDR("10.0.0.1"), endpoint0 + ".clientCIDR", ""},
	{"clientCIDR host bits", setCIDR("10.1.0.0/8"), endpoint0 + ".clientCIDR", ""},
	{"clientCIDR upper-case IPv6", setCIDR("2001:DB8::/32"), endpoint0 + ".clientCIDR", ""},
	{"clientCIDR IPv4-mapped", setCIDR("::ffff:10.0.0.0/104"), endpoint0 + ".clientCIDR", ""},
	{"duplicate clientCIDR", addEndpoint("0.0.0.0/0"), "spec.kubernetesApiEndpoints.serverEndpoints[1]", ""},
	{"http scheme", setAddress("http://api.example.com"), endpoint0 + ".serverAddress", ""},
	{"user info", setAddress("https://admin:" + plantedSecret + "@api.example.com"), endpoint0 + ".serverAddress", ""},
	{"query string", setAddress("https://api.example.com/?access_token=" + plantedSecret), endpoint0 + ".serverAddress", ""},
	{"fragment", setAddress("https://api.example.com/#x"), endpoint0 + ".serverAddress", ""},
	{"port out of range", setAddress("api.example.com:70000"), endpoint0 + ".serverAddress", ""},
	{"empty serverAddress", setAddress(""), endpoint0 + ".serverAddress", ""},
	{"caBundle not PEM", func(c *v1alpha1.Cluster) { c.Spec.KubernetesAPIEndpoints.CABundle = []byte(plantedSecret) }, "spec.kubernetesApiEndpoints.caBundle", ""},
	{"caBundle with a private key", func(c *v1alpha1.Cluster) {
		c.Spec.KubernetesAPIEndpoints.CABundle = append(append([]byte{}, testCAPEM...),
			"-----BEGIN PRIVATE KEY-----\n"+plantedSecret+"\n-----END PRIVATE KEY-----\n"...)
	}, "spec.kubernetesApiEndpoints.caBundle", ""},
	{"duplicate provider name", addProvider("controller", "exec"), "spec.authInfo.providers[1]", ""},
	{"empty provider name", func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.Providers[0].Name = "" }, provider0 + ".name", ""},
	{"empty provider type", func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.Providers[0].Type.Name = "" }, provider0 + ".type.name", ""},
	{"inline token", setConfig("token", plantedSecret), provider0 + ".config", ""},
	{"inline password", setConfig("Password", plantedSecret), provider0 + ".config", ""},
	{"inline client-key-data", setConfig("client-key-data", plantedSecret), provider0 + ".config", ""},
	{"inline client-certificate-data", setConfig("client_certificate_data", plantedSecret), provider0 + ".config", ""},
	{"private key value", setConfig("env", "K=-----BEGIN RSA PRIVATE KEY-----\n"+plantedSecret+"\n-----END RSA PRIVATE KEY-----"), provider0 + ".config", ""},
	{"long config value", setConfig("args", plantedSecret+strings.Repeat("a", 4097)), provider0 + ".config", ""},
	{"config value of 4097 two-byte characters", setConfig("args", strings.Repeat("ü", 4097)), provider0 + ".config", ""},
	{"displayName of 257 two-byte characters", func(c *v1alpha1.Cluster) { c.Spec.DisplayName = strings.Repeat("é", 257) }, "spec.displayName", ""},
	{"provider name of 254 three-byte characters", func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.Providers[0].Name = strings.Repeat("名", 254) }, provider0 + ".name", ""},
	{"inline apiToken", setConfig("apiToken", plantedSecret), provider0 + ".config", `"apiToken"`},
	{"inline sessionToken", setConfig("sessionToken", plantedSecret), provider0 + ".config", `"sessionToken"`},
	{"inline secretAccessKey", setConfig("secretAccessKey", plantedSecret), provider0 + ".config", `"secretAccessKey"`},
	{"inline github_token", setConfig("github_token", plantedSecret), provider0 + ".config", `"github_token"`},
	{"inline tls.key", setConfig("tls.key", plantedSecret), provider0 + ".config", `"tls.key"`},
	{"inline clientSecret", setConfig("clientSecret", plantedSecret), provider0 + ".config", `"clientSecret"`},
	{"PGP private key value", setConfig("installHint", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"+plantedSecret+"\n-----END PGP PRIVATE KEY BLOCK-----"), provider0 + ".config", `config["installHint"]`},
	{"base64 PEM private key value", setConfig("args", base64.StdEncoding.EncodeToString([]byte(testKeyPEM))), provider0 + ".config", `config["args"]`},
	{"base64 PEM private key value, shifted", setConfig("args", base64.StdEncoding.EncodeToString([]byte("x"+testKeyPEM))), provider0 + ".config", `config["args"]`},
	{"base64 PEM private key value, shifted twice", setConfig("args", base64.StdEncoding.EncodeToString([]byte("xy"+testKeyPEM))), provider0 + ".config", `config["args"]`},
	{"service account token value", setConfig("name", testJWT), provider0 + ".config", `config["name"]`},
	{"exec arg --oidc-client-secret=value", setConfig("args", `["get-token","--oidc-client-secret=`+plantedSecret+`"]`), provider0 + ".config", `config["args"] --oidc-client-secret passes a credential`},
	{"exec arg --password value", setConfig("args", `["--username","u","--password","`+plantedSecret+`"]`), provider0 + ".config", `config["args"] --password passes`},
	{"exec arg --Token value, as words", setConfig("args", "get-token --Token "+plantedSecret), provider0 + ".config", `config["args"] --token passes`},
	{"exec arg --aws-secret-access-key", setConfig("args", `["--aws-secret-access-key=`+plantedSecret+`"]`), provider0 + ".config", "--aws-secret-access-key"},
	{"exec arg --client-key", setConfig("args", `["--client-key",  "`+plantedSecret+`"]`), provider0 + ".config", "--client-key"},
	{"exec arg --access-token at the end of words", setConfig("args", "x --access-token="+plantedSecret), provider0 + ".config", "--access-token"},
	{"exec arg --apikey", setConfig("args", `["--apikey=`+plantedSecret+`"]`), provider0 + ".config", "--apikey"},
	{"caBundle holding a base64 private key", func(c *v1alpha1.Cluster) {
		c.Spec.KubernetesAPIEndpoints.CABundle = append(append([]byte{}, testCAPEM...), testKeyPEM...)
	}, "spec.kubernetesApiEndpoints.caBundle", "caBundle must not hold a private key"},
	{"tunnel agent that is not a DNS label", func(c *v1alpha1.Cluster) {
		c.Spec.KubernetesAPIEndpoints.Tunnel = &v1alpha1.Tunnel{Agent: "edge.agent"}
	}, "spec.kubernetesApiEndpoints.tunnel.agent", ""},
	{"tunnel without an agent", func(c *v1alpha1.Cluster) {
		c.Spec.KubernetesAPIEndpoints.Tunnel = &v1alpha1.Tunnel{}
	}, "spec.kubernetesApiEndpoints.tunnel.agent", ""},
}

// acceptedClusters are what ValidateCluster accepts, and the server too: the edges of each rule.
var acceptedClusters = []struct {
	name   string
	mutate func(*v1alpha1.Cluster)
}{
	{"bare host", setAddress("api.example.com")},
	{"IPv4 and port", setAddress("192.0.2.1:443")},
	{"IPv6 URL with port", setAddress("https://[2001:db8::1]:6443")},
	{"URL with path", setAddress("https://rancher.example.com/k8s/clusters/c-m-abc12")},
	{"port 65535", setAddress("api.example.com:65535")},
	{"IPv6 CIDR", setCIDR("2001:db8::/32")},
	{"IPv4 host route", setCIDR("10.1.2.3/32")},
	{"two CA certificates", func(c *v1alpha1.Cluster) {
		c.Spec.KubernetesAPIEndpoints.CABundle = append(append([]byte{}, testCAPEM...), testCAPEM...)
	}},
	{"pointer keys", func(c *v1alpha1.Cluster) {
		c.Spec.AuthInfo.Providers[0].Config = map[string]string{"name": "n", "namespace": "ns", "key": "value", "tokenPath": "/p"}
	}},
	{"public certificate in config", setConfig("ca", string(testCAPEM))},
	{"exec args that point at credentials, or only look alike", setConfig("args",
		`["get-token","--token-file=/p","--password-file","/q","--token-cache-dir=/d","--secret-name","n","--grant-type","password",`+
			`"--monkey=1","--client-id=x","--oidc-issuer-url=https://x","--key-file=/k","--tokens-dir=/t","token","--region","eu"]`)},
	{"exec args as words that point at credentials", setConfig("args", "eks get-token --cluster-name prod --token-file /p --output json")},
	{"the built-in types' pointer keys, and pointer keys holding credential words", func(c *v1alpha1.Cluster) {
		c.Spec.AuthInfo.Providers[0].Config = map[string]string{}
		for _, k := range pointerKeys {
			c.Spec.AuthInfo.Providers[0].Config[k] = "x"
		}
	}},
	{"displayName of 256 two-byte characters", func(c *v1alpha1.Cluster) { c.Spec.DisplayName = strings.Repeat("é", 256) }},
	{"config value of 4096 two-byte characters", setConfig("args", strings.Repeat("ü", 4096))},
	{"provider name of 253 three-byte characters", func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.Providers[0].Name = strings.Repeat("名", 253) }},
	{"no endpoints or providers", func(c *v1alpha1.Cluster) { c.Spec = v1alpha1.ClusterSpec{} }},
	{"reached through a tunnel", func(c *v1alpha1.Cluster) {
		c.Spec.KubernetesAPIEndpoints.Tunnel = &v1alpha1.Tunnel{Agent: "edge-3-agent"}
	}},
}

// checkRejected creates tt's Cluster, as the i-th: ValidateCluster and the server both refuse
// it, name tt.field, and repeat no secret it held.
func checkRejected(t *testing.T, clusters clusterregistryv1alpha1.ClusterInterface, i int, tt rejectedCluster) {
	t.Helper()
	c := newCluster("bad-" + strconv.Itoa(i))
	tt.mutate(c)

	// A CA bundle travels base64-encoded: that form must not come back either.
	leaks := []string{plantedSecret}
	if ca := c.Spec.KubernetesAPIEndpoints.CABundle; len(ca) > 0 {
		leaks = append(leaks, base64.StdEncoding.EncodeToString(ca))
	}
	for _, p := range c.Spec.AuthInfo.Providers {
		for _, v := range p.Config {
			if len(v) >= 12 { // values, not the pointers such as "bad-1-token"
				leaks = append(leaks, v)
			}
		}
	}
	leaked := func(msg string) bool {
		for _, l := range leaks {
			if strings.Contains(msg, l) {
				return true
			}
		}
		return false
	}

	goErrs := v1alpha1.ValidateCluster(c)
	goNamed := false
	for _, e := range goErrs {
		goNamed = goNamed || strings.HasPrefix(e.Field, tt.field)
		if leaked(e.Error()) {
			t.Errorf("ValidateCluster error repeats the secret: %v", e)
		}
	}
	if !goNamed {
		t.Errorf("ValidateCluster() = %v, want an error on %s", goErrs, tt.field)
	}
	if tt.says != "" && !strings.Contains(fmt.Sprint(goErrs), tt.says) {
		t.Errorf("ValidateCluster() = %v, want it to say %s", goErrs, tt.says)
	}

	_, err := clusters.Create(testContext(t), c, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("server accepted it or failed otherwise: %v", err)
	}
	if leaked(err.Error()) {
		t.Errorf("server error repeats the secret: %v", err)
	}
	if !serverNamesField(err, tt.field) {
		t.Errorf("server error does not name %s: %v", tt.field, err)
	}
	if tt.says != "" && !strings.Contains(err.Error(), tt.says) {
		t.Errorf("server error does not say %s: %v", tt.says, err)
	}
}

// A PEM file pasted into caBundle without base64-encoding it (kubectl apply of hand-written YAML)
// is refused with a message that says what caBundle takes, and no part of it comes back: the
// server used to check the field's base64 format first and repeat the whole value, twice.
func TestRawPEMCABundleIsRefusedWithoutEcho(t *testing.T) {
	ns := newNamespace(t)
	dyn, err := dynamic.NewForConfig(lf.Registry.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster("raw-pem")
	c.Spec.KubernetesAPIEndpoints.CABundle = nil
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	u.SetKind("Cluster")
	raw := string(testCAPEM) + testKeyPEM
	if err := unstructured.SetNestedField(u.Object, raw, "spec", "kubernetesApiEndpoints", "caBundle"); err != nil {
		t.Fatal(err)
	}
	_, err = dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource("clusters")).Namespace(ns).Create(testContext(t), u, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("server accepted a raw PEM caBundle or failed otherwise: %v", err)
	}
	if !serverNamesField(err, "spec.kubernetesApiEndpoints.caBundle") || !strings.Contains(err.Error(), "caBundle takes PEM certificates encoded as base64") {
		t.Errorf("the error should name caBundle and say it takes base64: %v", err)
	}
	for _, part := range []string{plantedSecret, "PRIVATE KEY", "BEGIN CERTIFICATE-----\n"} {
		if strings.Contains(err.Error(), part) {
			t.Errorf("the error repeats %q of the value: %v", part, err)
		}
	}
}

// pointerKeys are config keys that say where a credential is. The guard against pasted
// credentials must let every one through, on the server and in ValidateCluster alike.
var pointerKeys = []string{
	// The built-in types' keys.
	"name", "namespace", "key", "path", "context", "command", "args", "env", "apiVersion",
	"provideClusterInfo", "installHint", "clusterConfig",
	// Pointers whose names hold a credential word.
	"secretName", "secretNamespace", "tokenFile", "token-path", "credentialsFile", "tokenAudience",
	"apiKeyRef", "password_file", "client-key-file",
}

// testKeyPEM is a private key block (its body is not a real key: the rules look for the block).
const testKeyPEM = "-----BEGIN EC PRIVATE KEY-----\n" + plantedSecret + "\n-----END EC PRIVATE KEY-----\n"

// testJWT has the shape of a service account token.
const testJWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9.eyJpc3MiOiJrdWJlcm5ldGVzIn0." + plantedSecret

func serverNamesField(err error, fieldPath string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == fieldPath || strings.HasPrefix(cause.Field, fieldPath+".") {
			return true
		}
	}
	return false
}
