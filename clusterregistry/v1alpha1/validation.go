package v1alpha1

import (
	"encoding/base64"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The patterns below are the very ones the CRD's CEL rules use (CEL's matches() is Go's RE2), so a
// Cluster that ValidateCluster accepts is one the server accepts. A test holds the CRD to them.
const (
	// ServerAddressPattern matches an https URL (https://host[:port][/path]) or a bare host[:port].
	ServerAddressPattern = `^(https://)?([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?(/[^?#\s]*)?$`

	// Base64Pattern matches standard, padded base64 on one line: how caBundle travels in JSON.
	Base64Pattern = `^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`
	// CABundlePrefix is "-----BEGIN CERTIFICATE-----" in base64: every caBundle begins with it.
	// The server sees caBundle only as base64 text (CEL cannot decode it), so the rules on caBundle
	// are written on that text, and ValidateCluster applies them to the same text.
	CABundlePrefix = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"

	// CredentialKeyPattern matches a normalized config key (lower case, without '-', '_' and '.')
	// that names a credential: token, apiToken, sessionToken, password, secretAccessKey,
	// client-key-data, tls.key, ...
	CredentialKeyPattern = `token|passw|passphrase|secret|credential|privatekey|apikey|accesskey|clientkey|keydata|certificatedata|tlskey|bearer`
	// PointerKeyPattern matches normalized keys that say where a credential is, though they hold
	// a credential word: secretName, tokenFile, credentialsPath, tokenAudience, ...
	PointerKeyPattern = `(name|namespace|ref|path|file|dir|env|url|audience)$`

	// CredentialArgPattern matches, in the lower-cased text of a provider's "args" config (the
	// exec type's arguments: a JSON array, or words separated by spaces), a flag that passes a
	// credential on the command line: --client-secret, --oidc-client-secret, --password, --token,
	// --access-token, --api-key, --client-key, --aws-secret-access-key, ..., in both the
	// --flag=value and the --flag value forms. Flags that say where a credential is pass, as their
	// names end in another word: --token-file, --password-file, --token-cache-dir, --secret-name.
	// Whatever the registry holds, every reader of the cluster set can read.
	CredentialArgPattern = `(^|[" ])--?[a-z0-9_.-]*(token|passw(or)?d|passphrase|secret|credentials?|bearer|(api|access|private|secret|client|signing)key|[-_.]key|key[-_.]?data)(=|"| |$)`
)

// Limits enforced by the CRD's schema and by ValidateCluster alike. Lengths count characters
// (Unicode code points), as the server's maxLength does.
const (
	MaxDisplayNameLength     = 256
	MaxServerEndpoints       = 32
	MaxClientCIDRLength      = 64
	MaxServerAddressLength   = 2048
	MaxCABundleEncodedLength = 65536 // base64 characters, as the server sees the field
	MaxProviders             = 16
	MaxProviderNameLength    = 253
	MaxProviderConfigEntries = 64
	// MaxProviderConfigValueLength bounds each config value. controller-gen has no marker for map
	// values, so hack/crdpatch writes it into the CRD.
	MaxProviderConfigValueLength = 4096
)

var (
	serverAddressRE = regexp.MustCompile(ServerAddressPattern)
	credentialKeyRE = regexp.MustCompile(CredentialKeyPattern)
	pointerKeyRE    = regexp.MustCompile(PointerKeyPattern)
	credentialArgRE = regexp.MustCompile(CredentialArgPattern)
)

// PrivateKeyBase64Markers are "PRIVATE KEY" base64-encoded at each of the three byte alignments it
// can take: one of them is in the base64 of any PEM or PGP private key.
var PrivateKeyBase64Markers = []string{"UFJJVkFURSBLRV", "BSSVZBVEUgS0VZ", "QUklWQVRFIEtFW"}

// CredentialValueMarkers are the substrings that make a config value a credential: a PEM or PGP
// private key ("PRIVATE KEY"), the same base64-encoded, or a JSON Web Token such as a service
// account token (".eyJ", where its payload begins). The CRD's rules test each with contains(), in
// three rules: the server's CEL cost budget allows that over 16 providers' 64 values of 4096
// characters, where one rule, or a regular expression, was over it.
var CredentialValueMarkers = append([]string{"PRIVATE KEY"}, append(PrivateKeyBase64Markers, ".eyJ")...)

func containsAny(s string, markers []string) bool {
	for _, m := range markers {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// Messages shared by ValidateCluster and the CRD's rules (the CRD's copies are in types.go's
// markers; a test holds them equal).
const (
	msgCABundleBase64     = "caBundle takes PEM certificates encoded as base64 on one line (as base64 -w0 ca.crt prints them)"
	msgCABundleCerts      = "caBundle must hold PEM-encoded CERTIFICATE blocks, beginning with -----BEGIN CERTIFICATE-----"
	msgCABundlePrivateKey = "caBundle must not hold a private key"
	msgCredentialKey      = "names a credential; config holds pointers to credentials (a Secret's name, a file's path), not credentials"
	msgCredentialValue    = "holds a private key or a token; config holds pointers to credentials, not credentials"
	msgCredentialArg      = "passes a credential on the command line, for every reader of the cluster set to see; have the plugin read it on the reader's side (a file, its environment)"
)

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
	if chars(s.DisplayName) > MaxDisplayNameLength {
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
		// What the server checks is the base64 text that JSON carries; check the same text.
		p, text := fldPath.Child("caBundle"), base64.StdEncoding.EncodeToString(e.CABundle)
		switch {
		case len(text) > MaxCABundleEncodedLength:
			allErrs = append(allErrs, field.TooLong(p, "", MaxCABundleEncodedLength))
		case !strings.HasPrefix(text, CABundlePrefix):
			allErrs = append(allErrs, field.Invalid(p, field.OmitValueType{}, msgCABundleCerts))
		}
		if containsAny(text, PrivateKeyBase64Markers) {
			allErrs = append(allErrs, field.Invalid(p, field.OmitValueType{}, msgCABundlePrivateKey))
		}
	}
	if e.Tunnel != nil {
		// The server's pattern is a DNS label's: the agent's name is part of the name a tunnel
		// routes by (access.TunnelHost), which must be unambiguous.
		p := fldPath.Child("tunnel", "agent")
		for _, msg := range validation.IsDNS1123Label(e.Tunnel.Agent) {
			allErrs = append(allErrs, field.Invalid(p, e.Tunnel.Agent, msg+": it names a ServiceAccount of the Cluster's namespace"))
		}
	}
	return allErrs
}

func validateClientCIDR(s string, fldPath *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case chars(s) > MaxClientCIDRLength:
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
	case chars(s) > MaxServerAddressLength:
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
	case chars(s) > MaxProviderNameLength:
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
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "config key "+strconv.Quote(k)+" "+msgCredentialKey))
		}
		if chars(config[k]) > MaxProviderConfigValueLength {
			allErrs = append(allErrs, field.TooLong(fldPath.Key(k), "", MaxProviderConfigValueLength))
		}
		if IsCredentialValue(config[k]) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Key(k), "config["+strconv.Quote(k)+"] "+msgCredentialValue))
		}
	}
	if flag := CredentialArgFlag(config["args"]); flag != "" {
		allErrs = append(allErrs, field.Forbidden(fldPath.Key("args"), `config["args"] `+flag+" "+msgCredentialArg))
	}
	return allErrs
}

// CredentialArgFlag returns the first flag in args (an exec provider's "args" config: a JSON
// array, or words separated by spaces; or one argument) that passes a credential, lower-cased and
// without its value, or "" when there is none. See CredentialArgPattern; like IsCredentialKey it is
// a guard against pasted credentials, not a proof that none is there.
func CredentialArgFlag(args string) string {
	// The CRD's self['args'].lowerAscii().find(...).replace('"', '').replace('=', '').replace(' ', '').
	found := credentialArgRE.FindString(lowerASCII(args))
	return strings.NewReplacer(`"`, "", "=", "", " ", "").Replace(found)
}

// lowerASCII lower-cases ASCII letters only, as CEL's lowerAscii() does.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// IsCredentialKey reports whether a provider config key names a credential (token, apiToken,
// password, secretAccessKey, client-key-data, ...) rather than where one is (name, path,
// secretName, tokenFile, ...). Case and the separators '-', '_' and '.' are ignored, as the CRD
// ignores them. It is a guard against pasted credentials, not a proof that none is stored: a
// credential under an innocent key passes.
func IsCredentialKey(key string) bool {
	norm := normalizeKey(key)
	return credentialKeyRE.MatchString(norm) && !pointerKeyRE.MatchString(norm)
}

// IsCredentialValue reports whether a provider config value holds a private key (PEM or PGP,
// plain or base64-encoded) or a JSON Web Token. Like IsCredentialKey, it is a guard, not a proof.
func IsCredentialValue(value string) bool {
	return containsAny(value, CredentialValueMarkers)
}

// normalizeKey lower-cases ASCII letters and drops '-', '_' and '.': the CRD's
// k.lowerAscii().replace('-', ”).replace('_', ”).replace('.', ”).
func normalizeKey(key string) string {
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
	return string(norm)
}

// chars counts characters as the server's maxLength does: Unicode code points, not bytes.
func chars(s string) int {
	return utf8.RuneCountInString(s)
}
