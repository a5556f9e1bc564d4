package v1alpha1

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FuzzValidateCluster feeds arbitrary JSON, the form clients and the server read, to
// ValidateCluster. It must never panic, must give the same answer twice, must never put a server
// address, CA bundle or config value into an error, and must accept the round-tripped form of
// anything it accepts.
func FuzzValidateCluster(f *testing.F) {
	seed, err := json.Marshal(validCluster())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"metadata":{"name":"a"},"spec":{"kubernetesApiEndpoints":{"serverEndpoints":[{"clientCIDR":"::/0","serverAddress":"https://u:p@h"}]}}}`))
	f.Add([]byte(`{"metadata":{"name":"a"},"spec":{"authInfo":{"providers":[{"name":"x","type":{"name":"secret"},"config":{"TOKEN":"-----BEGIN RSA PRIVATE KEY-----"}}]}}}`))
	f.Add([]byte(`{"metadata":{"name":"a"},"spec":{"kubernetesApiEndpoints":{"caBundle":"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFBQUEKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="}}}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		c := &Cluster{}
		if err := json.Unmarshal(data, c); err != nil {
			return
		}
		errs := ValidateCluster(c)
		if again := ValidateCluster(c); !reflect.DeepEqual(errs, again) {
			t.Fatalf("ValidateCluster is not deterministic: %v, then %v", errs, again)
		}
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "metadata.") && !strings.HasPrefix(e.Field, "spec.") {
				t.Errorf("error outside metadata and spec: %v", e)
			}
			if holdsSecretish(e.Field) {
				if _, omitted := e.BadValue.(field.OmitValueType); !omitted && e.BadValue != "" && e.BadValue != nil {
					t.Errorf("error on %s echoes its value: %v", e.Field, e)
				}
			}
		}
		if len(errs) > 0 {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal a valid cluster: %v", err)
		}
		back := &Cluster{}
		if err := json.Unmarshal(out, back); err != nil {
			t.Fatalf("unmarshal a valid cluster: %v", err)
		}
		if errs := ValidateCluster(back); len(errs) != 0 {
			t.Fatalf("valid cluster is invalid after a JSON round trip: %v", errs)
		}
	})
}

// holdsSecretish reports whether a field may carry material that must not be echoed.
func holdsSecretish(path string) bool {
	return strings.HasSuffix(path, ".serverAddress") || strings.HasSuffix(path, ".caBundle") || strings.Contains(path, ".config")
}
