package v1alpha1

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cluster-registry/sdk/testkit/testcerts"
)

// validCluster is a Cluster that passes every rule; each test case breaks one thing.
func validCluster() *Cluster {
	return &Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-eu-1", Namespace: "fleet", Labels: map[string]string{"env": "prod"}},
		Spec: ClusterSpec{
			DisplayName: "Production (EU 1)",
			KubernetesAPIEndpoints: KubernetesAPIEndpoints{
				ServerEndpoints: []ServerAddressByClientCIDR{
					{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://prod-eu-1.example.com:6443"},
					{ClientCIDR: "10.0.0.0/8", ServerAddress: "10.1.2.3:6443"},
					{ClientCIDR: "::/0", ServerAddress: "[2001:db8::1]:6443"},
				},
				CABundle: testCAPEM,
			},
			AuthInfo: AuthInfo{Providers: []AuthProviderConfig{
				{Name: "controller", Type: AuthProviderType{Name: ProviderTypeSecret}, Config: map[string]string{"name": "prod-eu-1-token"}},
				{Name: "people", Type: AuthProviderType{Name: ProviderTypeExec}, Config: map[string]string{"command": "gke-gcloud-auth-plugin"}},
			}},
		},
	}
}

var testCAPEM = testcerts.CAPEM()

func TestValidateClusterAcceptsValid(t *testing.T) {
	for name, mutate := range map[string]func(*Cluster){
		"as built":            func(*Cluster) {},
		"empty spec":          func(c *Cluster) { c.Spec = ClusterSpec{} },
		"generateName only":   func(c *Cluster) { c.Name, c.GenerateName = "", "prod-" },
		"https URL with path": func(c *Cluster) { setAddress(c, "https://rancher.example.com/k8s/clusters/c-abc12") },
		"bare host":           func(c *Cluster) { setAddress(c, "api.example.com") },
		"IPv4 host and port":  func(c *Cluster) { setAddress(c, "192.0.2.10:443") },
		"IPv6 URL":            func(c *Cluster) { setAddress(c, "https://[2001:db8::10]:6443") },
		"port 65535":          func(c *Cluster) { setAddress(c, "api.example.com:65535") },
		"IPv6 host route":     func(c *Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[2].ClientCIDR = "2001:db8::1/128" },
		"two CA certificates": func(c *Cluster) {
			c.Spec.KubernetesAPIEndpoints.CABundle = append(append([]byte{}, testCAPEM...), testCAPEM...)
		},
		"CRLF CA bundle": func(c *Cluster) {
			c.Spec.KubernetesAPIEndpoints.CABundle = []byte(strings.ReplaceAll(string(testCAPEM), "\n", "\r\n"))
		},
		"key that only points":   func(c *Cluster) { c.Spec.AuthInfo.Providers[0].Config["key"] = "value" },
		"token-file path":        func(c *Cluster) { c.Spec.AuthInfo.Providers[0].Config["path"] = "/var/run/secrets/tokens/member" },
		"public certificate PEM": func(c *Cluster) { c.Spec.AuthInfo.Providers[0].Config["ca"] = string(testCAPEM) },
	} {
		t.Run(name, func(t *testing.T) {
			c := validCluster()
			mutate(c)
			if errs := ValidateCluster(c); len(errs) != 0 {
				t.Errorf("ValidateCluster() = %v, want no errors", errs)
			}
		})
	}
}

func setAddress(c *Cluster, addr string) {
	c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = addr
}

// invalidSecret is planted in invalid Clusters: no error may repeat it.
const invalidSecret = "s3cr3t-Value-That-Must-Not-Leak"

// invalidClusters are changes to a valid Cluster that ValidateCluster refuses, each with the field
// its error must name and the kind of error.
var invalidClusters = []struct {
	name   string
	mutate func(*Cluster)
	field  string          // the field the error must name
	typ    field.ErrorType // the kind of error
}{
	{"no name", func(c *Cluster) { c.Name = "" }, "metadata.name", field.ErrorTypeRequired},
	{"bad name", func(c *Cluster) { c.Name = "Prod_EU" }, "metadata.name", field.ErrorTypeInvalid},
	{"bad label", func(c *Cluster) { c.Labels["bad key!"] = "x" }, "metadata.labels", field.ErrorTypeInvalid},
	{"long display name", func(c *Cluster) { c.Spec.DisplayName = strings.Repeat("x", MaxDisplayNameLength+1) }, "spec.displayName", field.ErrorTypeTooLong},
	{"too many endpoints", func(c *Cluster) {
		eps := make([]ServerAddressByClientCIDR, MaxServerEndpoints+1)
		for i := range eps {
			eps[i] = ServerAddressByClientCIDR{ClientCIDR: "10.0.0." + itoa(i) + "/32", ServerAddress: "a.example.com"}
		}
		c.Spec.KubernetesAPIEndpoints.ServerEndpoints = eps
	}, "spec.kubernetesApiEndpoints.serverEndpoints", field.ErrorTypeTooMany},
	{"duplicate clientCIDR", func(c *Cluster) {
		c.Spec.KubernetesAPIEndpoints.ServerEndpoints[1].ClientCIDR = "0.0.0.0/0"
	}, "spec.kubernetesApiEndpoints.serverEndpoints[1]", field.ErrorTypeDuplicate},
	{"missing clientCIDR", func(c *Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ClientCIDR = "" }, "spec.kubernetesApiEndpoints.serverEndpoints[0].clientCIDR", field.ErrorTypeRequired},
	{"clientCIDR not a CIDR", func(c *Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ClientCIDR = "10.0.0.0" }, "spec.kubernetesApiEndpoints.serverEndpoints[0].clientCIDR", field.ErrorTypeInvalid},
	{"clientCIDR host bits", func(c *Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[1].ClientCIDR = "10.1.0.0/8" }, "spec.kubernetesApiEndpoints.serverEndpoints[1].clientCIDR", field.ErrorTypeInvalid},
	{"clientCIDR not canonical IPv6", func(c *Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[2].ClientCIDR = "2001:DB8::/32" }, "spec.kubernetesApiEndpoints.serverEndpoints[2].clientCIDR", field.ErrorTypeInvalid},
	{"clientCIDR IPv4-mapped", func(c *Cluster) { c.Spec.KubernetesAPIEndpoints.ServerEndpoints[2].ClientCIDR = "::ffff:10.0.0.0/104" }, "spec.kubernetesApiEndpoints.serverEndpoints[2].clientCIDR", field.ErrorTypeInvalid},
	{"missing serverAddress", func(c *Cluster) { setAddress(c, "") }, "spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress", field.ErrorTypeRequired},
	{"http scheme", func(c *Cluster) { setAddress(c, "http://api.example.com") }, "spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress", field.ErrorTypeInvalid},
	{"user info", func(c *Cluster) { setAddress(c, "https://admin:"+invalidSecret+"@api.example.com") }, "spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress", field.ErrorTypeInvalid},
	{"query", func(c *Cluster) { setAddress(c, "https://api.example.com/?token="+invalidSecret) }, "spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress", field.ErrorTypeInvalid},
	{"port out of range", func(c *Cluster) { setAddress(c, "api.example.com:65536") }, "spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress", field.ErrorTypeInvalid},
	{"space in path", func(c *Cluster) { setAddress(c, "api.example.com/a b") }, "spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress", field.ErrorTypeInvalid},
	{"long serverAddress", func(c *Cluster) { setAddress(c, "https://a.example.com/"+strings.Repeat("p", MaxServerAddressLength)) }, "spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress", field.ErrorTypeTooLong},
	{"caBundle not PEM", func(c *Cluster) { c.Spec.KubernetesAPIEndpoints.CABundle = []byte("not a certificate") }, "spec.kubernetesApiEndpoints.caBundle", field.ErrorTypeInvalid},
	{"caBundle with a private key", func(c *Cluster) {
		c.Spec.KubernetesAPIEndpoints.CABundle = append(append([]byte{}, testCAPEM...), "-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n"...)
	}, "spec.kubernetesApiEndpoints.caBundle", field.ErrorTypeInvalid},
	{"caBundle too long", func(c *Cluster) {
		c.Spec.KubernetesAPIEndpoints.CABundle = []byte(strings.Repeat(string(testCAPEM), MaxCABundleEncodedLength/len(testCAPEM)))
	}, "spec.kubernetesApiEndpoints.caBundle", field.ErrorTypeTooLong},
	{"too many providers", func(c *Cluster) {
		ps := make([]AuthProviderConfig, MaxProviders+1)
		for i := range ps {
			ps[i] = AuthProviderConfig{Name: "p" + itoa(i), Type: AuthProviderType{Name: ProviderTypeExec}}
		}
		c.Spec.AuthInfo.Providers = ps
	}, "spec.authInfo.providers", field.ErrorTypeTooMany},
	{"duplicate provider name", func(c *Cluster) { c.Spec.AuthInfo.Providers[1].Name = "controller" }, "spec.authInfo.providers[1]", field.ErrorTypeDuplicate},
	{"missing provider name", func(c *Cluster) { c.Spec.AuthInfo.Providers[0].Name = "" }, "spec.authInfo.providers[0].name", field.ErrorTypeRequired},
	{"missing provider type", func(c *Cluster) { c.Spec.AuthInfo.Providers[1].Type.Name = "" }, "spec.authInfo.providers[1].type.name", field.ErrorTypeRequired},
	{"inline token", func(c *Cluster) { c.Spec.AuthInfo.Providers[0].Config["token"] = invalidSecret }, "spec.authInfo.providers[0].config[token]", field.ErrorTypeForbidden},
	{"inline password", func(c *Cluster) { c.Spec.AuthInfo.Providers[0].Config["Password"] = invalidSecret }, "spec.authInfo.providers[0].config[Password]", field.ErrorTypeForbidden},
	{"inline client-key-data", func(c *Cluster) { c.Spec.AuthInfo.Providers[0].Config["client-key-data"] = invalidSecret }, "spec.authInfo.providers[0].config[client-key-data]", field.ErrorTypeForbidden},
	{"inline clientCertificateData", func(c *Cluster) { c.Spec.AuthInfo.Providers[0].Config["clientCertificateData"] = invalidSecret }, "spec.authInfo.providers[0].config[clientCertificateData]", field.ErrorTypeForbidden},
	{"inline client_key", func(c *Cluster) { c.Spec.AuthInfo.Providers[0].Config["client_key"] = invalidSecret }, "spec.authInfo.providers[0].config[client_key]", field.ErrorTypeForbidden},
	{"private key value", func(c *Cluster) {
		c.Spec.AuthInfo.Providers[1].Config["env"] = "KEY=-----BEGIN EC PRIVATE KEY-----\n" + invalidSecret + "\n-----END EC PRIVATE KEY-----"
	}, "spec.authInfo.providers[1].config[env]", field.ErrorTypeForbidden},
	{"long config value", func(c *Cluster) {
		c.Spec.AuthInfo.Providers[1].Config["args"] = strings.Repeat("a", MaxProviderConfigValueLength+1)
	}, "spec.authInfo.providers[1].config[args]", field.ErrorTypeTooLong},
}

func TestValidateClusterRejectsInvalid(t *testing.T) {
	for _, tt := range invalidClusters {
		t.Run(tt.name, func(t *testing.T) {
			c := validCluster()
			tt.mutate(c)
			errs := ValidateCluster(c)
			found := false
			for _, e := range errs {
				if e.Field == tt.field && e.Type == tt.typ {
					found = true
				}
				if strings.Contains(e.Error(), invalidSecret) {
					t.Errorf("error echoes a secret value: %v", e)
				}
			}
			if !found {
				t.Errorf("ValidateCluster() = %v, want a %s error on %s", errs, tt.typ, tt.field)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestIsCredentialValue(t *testing.T) {
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----\n"
	for value, want := range map[string]bool{
		key:                                     true,
		"-----BEGIN PGP PRIVATE KEY BLOCK-----": true,
		base64.StdEncoding.EncodeToString([]byte(key)):        true,
		base64.StdEncoding.EncodeToString([]byte("a" + key)):  true,
		base64.StdEncoding.EncodeToString([]byte("ab" + key)): true,
		"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln":           true,
		"--token=eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln":   true,
		string(testCAPEM):                            false,
		"gke-gcloud-auth-plugin":                     false,
		`{"clusterName":"member-1"}`:                 false,
		"eyJjbHVzdGVyTmFtZSI6Im0xIn0=":               false, // base64 JSON, not a token
		base64.StdEncoding.EncodeToString(testCAPEM): false,
	} {
		if got := IsCredentialValue(value); got != want {
			t.Errorf("IsCredentialValue(%.40q) = %v, want %v", value, got, want)
		}
	}
}

func TestIsCredentialKey(t *testing.T) {
	for key, want := range map[string]bool{
		"token": true, "Token": true, "bearer-token": true, "id_token": true, "client-key-data": true,
		"client.key": true, "tls.key": true, "apiKey": true, "CLIENT_SECRET": true,
		"apiToken": true, "sessionToken": true, "secretAccessKey": true, "github_token": true, "passphrase": true,
		"credentials": true, "accessKey": true, "privateKey": true, "clientCertificateData": true,
		"name": false, "key": false, "path": false, "tokenPath": false, "secretName": false, "namespace": false,
		"context": false, "command": false, "args": false, "env": false, "apiVersion": false, "installHint": false,
		"provideClusterInfo": false, "clusterConfig": false, "tokenFile": false, "credentialsFile": false,
		"tokenAudience": false, "secretNamespace": false,
		// CEL's lowerAscii() leaves non-ASCII letters alone, so the Go check must too: U+212A KELVIN
		// SIGN lower-cases to "k" under strings.ToLower but is not the key "apikey".
		"api\u212Aey": false,
	} {
		if got := IsCredentialKey(key); got != want {
			t.Errorf("IsCredentialKey(%q) = %v, want %v", key, got, want)
		}
	}
}
