package v1alpha1

import (
	"encoding/base64"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The patterns below are the very ones the CRD's CEL rules use (CEL's matches() is Go's RE2), so a
// Cluster that ValidateCluster accepts is one the server accepts. A test holds the CRD to them.
const (
	// ServerAddressPattern matches an https URL (https://host[:port][/path]) or a bare host[:port].
	ServerAddressPattern = `^(https://)?([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?(/[^?#\s]*)?$`
	// CABundlePattern matches one or more PEM CERTIFICATE blocks and nothing else.
	CABundlePattern = `^(\s*-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----)+\s*$`
)

// Limits enforced by the CRD's schema and by ValidateCluster alike.
const (
	MaxDisplayNameLength     = 256
	MaxServerEndpoints       = 32
	MaxClientCIDRLength      = 64
	MaxServerAddressLength   = 2048
	MaxCABundleEncodedLength = 65536 // base64 characters, as the schema measures a byte field
	MaxProviders             = 16
	MaxProviderNameLength    = 253
	MaxProviderConfigEntries = 64
	// MaxProviderConfigValueLength bounds each config value. controller-gen has no marker for map
	// values, so hack/crdpatch writes it into the CRD.
	MaxProviderConfigValueLength = 4096
)

var (
	serverAddressRE = regexp.MustCompile(ServerAddressPattern)
	caBundleRE      = regexp.MustCompile(CABundlePattern)
)

// credentialKeys are config keys, lower-cased with '-', '_' and '.' removed, that name a credential
// rather than point to one. The CRD rejects the same list.
var credentialKeys = []string{
	"token", "bearertoken", "idtoken", "accesstoken", "refreshtoken",
	"password", "passwd", "secret", "clientsecret",
	"clientkey", "clientkeydata", "clientcertificatedata", "privatekey", "tlskey", "apikey",
}

// privateKeyMarker ends every PEM private key header ("-----BEGIN RSA PRIVATE KEY-----" and kin).
const privateKeyMarker = "PRIVATE KEY-----"

// ValidateCluster checks a Cluster against the rules the server enforces on create and update, so
// that clients can report every problem, each naming its field, before they send anything. Values
// that could hold a secret (server addresses, config values, CA bundles) are never echoed in the
// errors.
func ValidateCluster(c *Cluster) field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, ValidateClusterSpec(&c.Spec, field.NewPath("spec"))...)
}

func validateObjectMeta(m *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case m.Name != "":
		for _, msg := range apivalidation.NameIsDNSSubdomain(m.Name, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), m.Name, msg))
		}
	case m.GenerateName == "":
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), "name or generateName is required"))
	}
	allErrs = append(allErrs, metav1validation.ValidateLabels(m.Labels, fldPath.Child("labels"))...)
	return append(allErrs, apivalidation.ValidateAnnotations(m.Annotations, fldPath.Child("annotations"))...)
}

// ValidateClusterSpec checks a ClusterSpec found at fldPath; ValidateCluster calls it for spec.
func ValidateClusterSpec(s *ClusterSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(s.DisplayName) > MaxDisplayNameLength {
		allErrs = append(allErrs, field.TooLong(fldPath.Child("displayName"), "", MaxDisplayNameLength))
	}
	allErrs = append(allErrs, validateEndpoints(&s.KubernetesAPIEndpoints, fldPath.Child("kubernetesApiEndpoints"))...)
	return append(allErrs, validateAuthInfo(&s.AuthInfo, fldPath.Child("authInfo"))...)
}

func validateEndpoints(e *KubernetesAPIEndpoints, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	epsPath := fldPath.Child("serverEndpoints")
	if len(e.ServerEndpoints) > MaxServerEndpoints {
		allErrs = append(allErrs, field.TooMany(epsPath, len(e.ServerEndpoints), MaxServerEndpoints))
	}
	seen := make(map[string]bool, len(e.ServerEndpoints))
	for i, ep := range e.ServerEndpoints {
		p := epsPath.Index(i)
		if seen[ep.ClientCIDR] {
			allErrs = append(allErrs, field.Duplicate(p, ep.ClientCIDR))
		}
		seen[ep.ClientCIDR] = true
		allErrs = append(allErrs, validateClientCIDR(ep.ClientCIDR, p.Child("clientCIDR"))...)
		allErrs = append(allErrs, validateServerAddress(ep.ServerAddress, p.Child("serverAddress"))...)
	}
	if len(e.CABundle) > 0 {
		p := fldPath.Child("caBundle")
		switch {
		case base64.StdEncoding.EncodedLen(len(e.CABundle)) > MaxCABundleEncodedLength:
			allErrs = append(allErrs, field.TooLong(p, "", MaxCABundleEncodedLength))
		case !caBundleRE.Match(e.CABundle):
			allErrs = append(allErrs, field.Invalid(p, field.OmitValueType{}, "caBundle must hold only PEM-encoded CERTIFICATE blocks"))
		}
	}
	return allErrs
}

func validateClientCIDR(s string, fldPath *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case len(s) > MaxClientCIDRLength:
		return field.ErrorList{field.TooLong(fldPath, "", MaxClientCIDRLength)}
	}
	// The same test as the CRD's isCIDR(self) && string(cidr(self).masked()) == self.
	p, err := netip.ParsePrefix(s)
	if err != nil || p.Addr().Is4In6() || p.Masked().String() != s {
		return field.ErrorList{field.Invalid(fldPath, s, "clientCIDR must be a canonical IPv4 or IPv6 CIDR with host bits zero, such as 10.0.0.0/8 or 2001:db8::/32")}
	}
	return nil
}

func validateServerAddress(s string, fldPath *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case len(s) > MaxServerAddressLength:
		return field.ErrorList{field.TooLong(fldPath, "", MaxServerAddressLength)}
	case !serverAddressRE.MatchString(s):
		// Not echoed: a malformed address may carry user info such as https://user:password@host.
		return field.ErrorList{field.Invalid(fldPath, field.OmitValueType{}, "serverAddress must be an https URL (https://host[:port][/path]) or host[:port]; other schemes, user info, query and fragment are not allowed")}
	}
	return nil
}

func validateAuthInfo(a *AuthInfo, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	provPath := fldPath.Child("providers")
	if len(a.Providers) > MaxProviders {
		allErrs = append(allErrs, field.TooMany(provPath, len(a.Providers), MaxProviders))
	}
	seen := make(map[string]bool, len(a.Providers))
	for i := range a.Providers {
		p := &a.Providers[i]
		pp := provPath.Index(i)
		if seen[p.Name] {
			allErrs = append(allErrs, field.Duplicate(pp, p.Name))
		}
		seen[p.Name] = true
		allErrs = append(allErrs, validateName(p.Name, pp.Child("name"))...)
		allErrs = append(allErrs, validateName(p.Type.Name, pp.Child("type", "name"))...)
		allErrs = append(allErrs, validateProviderConfig(p.Config, pp.Child("config"))...)
	}
	return allErrs
}

func validateName(s string, fldPath *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case len(s) > MaxProviderNameLength:
		return field.ErrorList{field.TooLong(fldPath, "", MaxProviderNameLength)}
	}
	return nil
}

func validateProviderConfig(config map[string]string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(config) > MaxProviderConfigEntries {
		allErrs = append(allErrs, field.TooMany(fldPath, len(config), MaxProviderConfigEntries))
	}
	// Sorted so that errors come out in the same order on every call.
	for _, k := range slices.Sorted(maps.Keys(config)) {
		if IsCredentialKey(k) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "config must hold pointers to credentials, not credentials"))
		}
		if len(config[k]) > MaxProviderConfigValueLength {
			allErrs = append(allErrs, field.TooLong(fldPath.Key(k), "", MaxProviderConfigValueLength))
		}
		if strings.Contains(config[k], privateKeyMarker) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "config must not hold a private key"))
		}
	}
	return allErrs
}

// IsCredentialKey reports whether a provider config key names a credential (token, password,
// client-key-data, ...) that must not be stored in the registry. Case and the separators '-', '_'
// and '.' are ignored, as the CRD ignores them.
func IsCredentialKey(key string) bool {
	norm := make([]byte, 0, len(key))
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '-' || c == '_' || c == '.':
		case 'A' <= c && c <= 'Z': // ASCII only, like CEL's lowerAscii()
			norm = append(norm, c+('a'-'A'))
		default:
			norm = append(norm, c)
		}
	}
	return slices.Contains(credentialKeys, string(norm))
}
