package clusterregistry_test

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/cluster-registry/sdk/clusterregistry"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// schemaAt follows property names ("[]" steps into array items, "*" into map values).
func schemaAt(t *testing.T, s apiextensionsv1.JSONSchemaProps, path ...string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, step := range path {
		switch step {
		case "[]":
			s = *s.Items.Schema
		case "*":
			s = *s.AdditionalProperties.Schema
		default:
			child, ok := s.Properties[step]
			if !ok {
				t.Fatalf("CRD schema has no %q on the way to %v", step, path)
			}
			s = child
		}
	}
	return s
}

// The CRD's rules and the Go validation must be the same rules; these are the places they could
// drift apart when one is edited and the other is not.
func TestCRDMatchesGoValidation(t *testing.T) {
	crd := clusterregistry.CRD()
	if crd.Name != clusterregistry.CRDName {
		t.Fatalf("CRD name %q, want %q", crd.Name, clusterregistry.CRDName)
	}
	if got := crd.Annotations["api-approved.kubernetes.io"]; !strings.HasPrefix(got, "unapproved") {
		t.Errorf("api-approved.kubernetes.io annotation %q must start with 'unapproved' for a *.k8s.io group", got)
	}
	root := *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := schemaAt(t, root, "spec")
	ep := schemaAt(t, spec, "kubernetesApiEndpoints", "serverEndpoints", "[]")
	provider := schemaAt(t, spec, "authInfo", "providers", "[]")

	rules := func(s apiextensionsv1.JSONSchemaProps) string {
		var all []string
		for _, r := range s.XValidations {
			all = append(all, r.Rule)
		}
		return strings.Join(all, "\n")
	}
	endpointRules, configRules := rules(schemaAt(t, spec, "kubernetesApiEndpoints")), rules(schemaAt(t, provider, "config"))
	for _, c := range []struct {
		name, rules, want string
	}{
		{"serverAddress pattern", rules(ep), v1alpha1.ServerAddressPattern},
		{"caBundle base64 pattern", endpointRules, v1alpha1.Base64Pattern},
		{"caBundle prefix", endpointRules, "startsWith('" + v1alpha1.CABundlePrefix + "')"},
		{"credential key pattern", configRules, "matches('" + v1alpha1.CredentialKeyPattern + "')"},
		{"pointer key pattern", configRules, "matches('" + v1alpha1.PointerKeyPattern + "')"},
		{"credential arg pattern", configRules, "matches('" + v1alpha1.CredentialArgPattern + "')"},
	} {
		if !strings.Contains(c.rules, c.want) {
			t.Errorf("%s: CRD rules\n%s\ndo not hold the Go pattern\n%s", c.name, c.rules, c.want)
		}
	}
	for _, c := range []struct {
		name, rules, self string
		markers           []string
	}{
		{"caBundle private key", endpointRules, "self.caBundle", v1alpha1.PrivateKeyBase64Markers},
		{"config value", configRules, "self[k]", v1alpha1.CredentialValueMarkers},
	} {
		for _, m := range c.markers {
			if want := c.self + ".contains('" + m + "')"; !strings.Contains(c.rules, want) {
				t.Errorf("%s: CRD rules do not test %s", c.name, want)
			}
		}
	}
	// The server must not check caBundle's format before the rules above: that check's error
	// repeats the whole value.
	if f := schemaAt(t, spec, "kubernetesApiEndpoints", "caBundle").Format; f != "" {
		t.Errorf("caBundle has format %q; hack/crdpatch removes it", f)
	}

	limits := []struct {
		name string
		got  *int64
		want int
	}{
		{"displayName maxLength", spec.Properties["displayName"].MaxLength, v1alpha1.MaxDisplayNameLength},
		{"serverEndpoints maxItems", schemaAt(t, spec, "kubernetesApiEndpoints", "serverEndpoints").MaxItems, v1alpha1.MaxServerEndpoints},
		{"clientCIDR maxLength", schemaAt(t, ep, "clientCIDR").MaxLength, v1alpha1.MaxClientCIDRLength},
		{"serverAddress maxLength", schemaAt(t, ep, "serverAddress").MaxLength, v1alpha1.MaxServerAddressLength},
		{"caBundle maxLength", schemaAt(t, spec, "kubernetesApiEndpoints", "caBundle").MaxLength, v1alpha1.MaxCABundleEncodedLength},
		{"providers maxItems", schemaAt(t, spec, "authInfo", "providers").MaxItems, v1alpha1.MaxProviders},
		{"provider name maxLength", schemaAt(t, provider, "name").MaxLength, v1alpha1.MaxProviderNameLength},
		{"type name maxLength", schemaAt(t, provider, "type", "name").MaxLength, v1alpha1.MaxProviderNameLength},
		{"config maxProperties", schemaAt(t, provider, "config").MaxProperties, v1alpha1.MaxProviderConfigEntries},
		{"config value maxLength", schemaAt(t, provider, "config", "*").MaxLength, v1alpha1.MaxProviderConfigValueLength},
	}
	for _, l := range limits {
		if l.got == nil || *l.got != int64(l.want) {
			t.Errorf("%s: CRD has %v, Go validation has %d", l.name, l.got, l.want)
		}
	}
}

func TestCRDYAMLIsACopy(t *testing.T) {
	a := clusterregistry.CRDYAML()
	a[0] = 'X'
	if clusterregistry.CRDYAML()[0] == 'X' {
		t.Fatal("CRDYAML returned the embedded bytes, not a copy")
	}
}

// Descriptions are paragraphs, so kubectl explain wraps them to the terminal rather than at the
// Go comment's line breaks.
func TestCRDDescriptionsAreReflowed(t *testing.T) {
	var check func(path string, s apiextensionsv1.JSONSchemaProps)
	check = func(path string, s apiextensionsv1.JSONSchemaProps) {
		for _, para := range strings.Split(s.Description, "\n\n") {
			if strings.Contains(para, "\n") {
				t.Errorf("%s: description has a line break inside a paragraph: %q", path, para)
			}
		}
		for name, child := range s.Properties {
			check(path+"."+name, child)
		}
		if s.Items != nil && s.Items.Schema != nil {
			check(path+"[]", *s.Items.Schema)
		}
	}
	schema := clusterregistry.CRD().Spec.Versions[0].Schema.OpenAPIV3Schema
	if !strings.Contains(schema.Properties["spec"].Properties["displayName"].Description, "in place of metadata.name") {
		t.Error("displayName description not joined into one paragraph")
	}
	check("", *schema)
}
