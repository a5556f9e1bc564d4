package clusterregistry_test

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	setAddress := func(addr string) func(*v1alpha1.Cluster) {
		return func(c *v1alpha1.Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = addr }
	}
	setCIDR := func(cidr string) func(*v1alpha1.Cluster) {
		return func(c *v1alpha1.Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ClientCIDR = cidr }
	}
	setConfig := func(k, v string) func(*v1alpha1.Cluster) {
		return func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.Providers[0].Config[k] = v }
	}
	addEndpoint := func(cidr string) func(*v1alpha1.Cluster) {
		return func(c *v1alpha1.Cluster) {
			c.Spec.KubernetesAPIEndpoints.ServerEndpoints = append(c.Spec.KubernetesAPIEndpoints.ServerEndpoints,
				v1alpha1.ServerAddressByClientCIDR{ClientCIDR: cidr, ServerAddress: "10.0.0.1:6443"})
		}
	}
	addProvider := func(name, typ string) func(*v1alpha1.Cluster) {
		return func(c *v1alpha1.Cluster) {
			c.Spec.AuthInfo.Providers = append(c.Spec.AuthInfo.Providers,
				v1alpha1.AuthProviderConfig{Name: name, Type: v1alpha1.AuthProviderType{Name: typ}})
		}
	}
	const (
		endpoint0 = "spec.kubernetesApiEndpoints.serverEndpoints[0]"
		provider0 = "spec.authInfo.providers[0]"
	)

	rejected := []struct {
		name   string
		mutate func(*v1alpha1.Cluster)
		field  string // as the server names it; ValidateCluster names it or a field inside it
	}{
		{"long displayName", func(c *v1alpha1.Cluster) { c.Spec.DisplayName = strings.Repeat("d", 257) }, "spec.displayName"},
		{"clientCIDR not a CIDR", setCIDR("10.0.0.300/8"), endpoint0 + ".clientCIDR"},
		{"clientCIDR bare address", setCIDR("10.0.0.1"), endpoint0 + ".clientCIDR"},
		{"clientCIDR host bits", setCIDR("10.1.0.0/8"), endpoint0 + ".clientCIDR"},
		{"clientCIDR upper-case IPv6", setCIDR("2001:DB8::/32"), endpoint0 + ".clientCIDR"},
		{"clientCIDR IPv4-mapped", setCIDR("::ffff:10.0.0.0/104"), endpoint0 + ".clientCIDR"},
		{"duplicate clientCIDR", addEndpoint("0.0.0.0/0"), "spec.kubernetesApiEndpoints.serverEndpoints[1]"},
		{"http scheme", setAddress("http://api.example.com"), endpoint0 + ".serverAddress"},
		{"user info", setAddress("https://admin:" + plantedSecret + "@api.example.com"), endpoint0 + ".serverAddress"},
		{"query string", setAddress("https://api.example.com/?access_token=" + plantedSecret), endpoint0 + ".serverAddress"},
		{"fragment", setAddress("https://api.example.com/#x"), endpoint0 + ".serverAddress"},
		{"port out of range", setAddress("api.example.com:70000"), endpoint0 + ".serverAddress"},
		{"empty serverAddress", setAddress(""), endpoint0 + ".serverAddress"},
		{"caBundle not PEM", func(c *v1alpha1.Cluster) { c.Spec.KubernetesAPIEndpoints.CABundle = []byte(plantedSecret) }, "spec.kubernetesApiEndpoints.caBundle"},
		{"caBundle with a private key", func(c *v1alpha1.Cluster) {
			c.Spec.KubernetesAPIEndpoints.CABundle = append(append([]byte{}, testCAPEM...),
				"-----BEGIN PRIVATE KEY-----\n"+plantedSecret+"\n-----END PRIVATE KEY-----\n"...)
		}, "spec.kubernetesApiEndpoints.caBundle"},
		{"duplicate provider name", addProvider("controller", "exec"), "spec.authInfo.providers[1]"},
		{"empty provider name", func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.Providers[0].Name = "" }, provider0 + ".name"},
		{"empty provider type", func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.Providers[0].Type.Name = "" }, provider0 + ".type.name"},
		{"inline token", setConfig("token", plantedSecret), provider0 + ".config"},
		{"inline password", setConfig("Password", plantedSecret), provider0 + ".config"},
		{"inline client-key-data", setConfig("client-key-data", plantedSecret), provider0 + ".config"},
		{"inline client-certificate-data", setConfig("client_certificate_data", plantedSecret), provider0 + ".config"},
		{"private key value", setConfig("env", "K=-----BEGIN RSA PRIVATE KEY-----\n"+plantedSecret+"\n-----END RSA PRIVATE KEY-----"), provider0 + ".config"},
		{"long config value", setConfig("args", plantedSecret+strings.Repeat("a", 4097)), provider0 + ".config"},
	}
	for i, tt := range rejected {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster("bad-" + strconv.Itoa(i))
			tt.mutate(c)

			// A CA bundle travels base64-encoded: that form must not come back either.
			leaks := []string{plantedSecret}
			if ca := c.Spec.KubernetesAPIEndpoints.CABundle; len(ca) > 0 {
				leaks = append(leaks, base64.StdEncoding.EncodeToString(ca))
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
		})
	}

	// What ValidateCluster accepts, the server accepts: the edges of each rule.
	accepted := []struct {
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
		{"no endpoints or providers", func(c *v1alpha1.Cluster) { c.Spec = v1alpha1.ClusterSpec{} }},
	}
	for i, tt := range accepted {
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
