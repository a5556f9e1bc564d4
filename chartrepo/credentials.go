package chartrepo

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Credentials are a repository's username and password (a registry token goes in Password).
// Fetch sends them only to the repository's own host.
type Credentials struct {
	Username string
	Password string
}

// String keeps the password out of logs and errors that print Credentials.
func (c *Credentials) String() string {
	return "Credentials{Username: " + c.Username + ", Password: <redacted>}"
}

// CredentialsFromSecret reads the credentials secret holds for the repository at repositoryURL,
// where the Secret itself says they may go:
//
//   - a kubernetes.io/dockerconfigjson Secret: its auths entry for the repository's host (a
//     host:port, or a URL with that host), and no other;
//   - a kubernetes.io/basic-auth Secret (username, password): only when its
//     clusterregistry.k8s.io/servers annotation names the repository's scheme, host and port,
//     as a credential Secret for members names its servers (a *access.PinningError otherwise).
//
// Errors name the Secret and the host, never what the Secret holds.
func CredentialsFromSecret(secret *corev1.Secret, repositoryURL string) (*Credentials, error) {
	name := secret.Namespace + "/" + secret.Name
	origin, err := originOf(repositoryURL)
	if err != nil {
		return nil, err
	}
	switch secret.Type {
	case corev1.SecretTypeDockerConfigJson:
		var cfg struct {
			Auths map[string]struct {
				Username string `json:"username"`
				Password string `json:"password"`
				Auth     string `json:"auth"`
			} `json:"auths"`
		}
		if err := json.Unmarshal(secret.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			return nil, fmt.Errorf("pull Secret %s: %s is not a docker config (JSON with auths)", name, corev1.DockerConfigJsonKey)
		}
		for host, a := range cfg.Auths {
			if !sameHost(host, origin) {
				continue
			}
			user, pass := a.Username, a.Password
			if a.Auth != "" {
				u, p, ok := decodeAuth(a.Auth)
				if !ok {
					return nil, fmt.Errorf("pull Secret %s: the auth of its entry for %s is not base64 of user:password", name, host)
				}
				user, pass = u, p
			}
			return &Credentials{Username: user, Password: pass}, nil
		}
		return nil, fmt.Errorf("pull Secret %s has no auths entry for %s: a docker config's credentials go only to the hosts it names", name, origin.Host)
	case corev1.SecretTypeBasicAuth:
		var allowed []string
		for _, s := range strings.Split(secret.Annotations[v1alpha1.ServersAnnotation], ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			allowed = append(allowed, s)
			if o, err := originOf(s); err == nil && o.Scheme == origin.Scheme && o.Host == origin.Host {
				return &Credentials{Username: string(secret.Data[corev1.BasicAuthUsernameKey]), Password: string(secret.Data[corev1.BasicAuthPasswordKey])}, nil
			}
		}
		return nil, &access.PinningError{Secret: name, Server: origin.String(), Allowed: allowed}
	default:
		return nil, fmt.Errorf("pull Secret %s is of type %q: a repository's credentials are a %s or a %s Secret", name, secret.Type, corev1.SecretTypeDockerConfigJson, corev1.SecretTypeBasicAuth)
	}
}

// originOf is a repository URL's scheme, host and port, oci:// spoken as https://.
func originOf(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("repository URL %q is not an oci://, https:// or http:// URL with a host", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("repository URL must not hold user info: name a Secret instead")
	}
	scheme := u.Scheme
	switch scheme {
	case "oci":
		scheme = "https"
	case "https", "http":
	default:
		return nil, fmt.Errorf("repository URL scheme %q is not oci, https or http", u.Scheme)
	}
	host := u.Host
	if u.Port() == "" {
		port := "443"
		if scheme == "http" {
			port = "80"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	return &url.URL{Scheme: scheme, Host: host}, nil
}

// sameHost reports whether a docker config's key (host[:port], or a URL) is origin's host.
func sameHost(key string, origin *url.URL) bool {
	if !strings.Contains(key, "://") {
		key = origin.Scheme + "://" + key
	}
	o, err := originOf(key)
	return err == nil && o.Host == origin.Host
}

// decodeAuth decodes a docker config's auth: base64 of "user:password".
func decodeAuth(auth string) (user, pass string, ok bool) {
	b, err := base64.StdEncoding.DecodeString(auth)
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(b), ":")
}
