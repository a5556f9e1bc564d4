package access

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// execExtension is the kubeconfig cluster extension whose content client-go gives exec plugins as
// their cluster config.
const execExtension = "client.authentication.k8s.io/exec"

// kubeconfigSecretCredentials reads a kubeconfig from a Secret, by Cluster API's convention: config
// "name" defaults to "<cluster>-kubeconfig" and "key" to "value"; "context" picks a context (the
// kubeconfig's current one by default). The kubeconfig's own server pins the credentials inside
// it, as does the Secret's servers annotation. Files and exec plugins it names are on the caller's
// side: refused unless ResolverOptions.AllowKubeconfigSecretRefs, and then tied to servers by the
// caller's FileRoots and ExecPlugins, not by the Secret.
func kubeconfigSecretCredentials(ctx context.Context, req *Request) (*Credentials, error) {
	ref, _ := SecretOf(req.Cluster, *req.Provider)
	s, err := req.Secret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	key := req.Config("key", v1alpha1.KubeconfigSecretKey)
	if len(validation.IsConfigMapKey(key)) > 0 {
		return nil, errors.New("config.key is not a valid Secret key")
	}
	data := s.Data[key]
	if len(data) == 0 {
		return nil, fmt.Errorf("Secret %s/%s has no key %q", s.Namespace, s.Name, key)
	}
	return kubeconfigCredentials(req, data, req.Config("context", ""), kubeconfigSource{
		desc: fmt.Sprintf("Secret %s/%s key %q", s.Namespace, s.Name, key),
		pin:  func(server string) error { return req.CheckPinned(s, server) },
	})
}

// kubeconfigFileCredentials reads a kubeconfig of the caller's: config "path" (under
// ResolverOptions.FileRoots) and "context". The Cluster's server must be the one the kubeconfig gives
// the credentials for. Being the caller's own, the kubeconfig's server pins everything it names,
// files and exec plugins included (which still need FileRoots and ExecPlugins).
func kubeconfigFileCredentials(_ context.Context, req *Request) (*Credentials, error) {
	path, data, err := req.ReadFile(req.Config("path", ""))
	if err != nil {
		return nil, fmt.Errorf("config.path: %w", err)
	}
	return kubeconfigCredentials(req, data, req.Config("context", ""), kubeconfigSource{
		desc:        "kubeconfig " + path,
		baseDir:     filepath.Dir(path),
		callerOwned: true,
		pin: func(server string) error {
			if err := req.callerPinned("", path); err != nil {
				return err
			}
			if u, err := ServerURL(server); err == nil && u.String() == req.Server.String() {
				return nil
			}
			return &PinningError{File: path, Server: req.Server.String(), Allowed: []string{server}}
		},
	})
}

// kubeconfigSource says where a kubeconfig came from, and so what it may name.
type kubeconfigSource struct {
	desc    string
	baseDir string // for relative paths in a kubeconfig file
	// callerOwned is set for a kubeconfig of the caller's: its server pins the files and exec
	// plugins it names. A kubeconfig Secret's server pins only the data inside the Secret.
	callerOwned bool
	pin         func(server string) error
}

// kubeconfigCredentials takes the credentials of one context of a kubeconfig. Files it names are
// read under the same FileRoots rule, relative to baseDir; exec plugins go through the same
// ExecPlugins policy as the exec provider type. Its insecure-skip-tls-verify, proxy-url and
// impersonation are ignored: those are the caller's choices alone.
func kubeconfigCredentials(req *Request, data []byte, contextName string, src kubeconfigSource) (*Credentials, error) {
	cluster, auth, err := kubeconfigContext(data, contextName, src)
	if err != nil {
		return nil, err
	}
	if err := src.pin(cluster.Server); err != nil {
		return nil, err
	}
	refs := kubeconfigRefs{req: req, src: src}
	creds := &Credentials{CAData: clone(cluster.CertificateAuthorityData), TLSServerName: cluster.TLSServerName}
	if len(creds.CAData) == 0 && cluster.CertificateAuthority != "" {
		if creds.CAData, err = refs.readCA(cluster.CertificateAuthority); err != nil {
			return nil, fmt.Errorf("%s: certificate-authority: %w", src.desc, err)
		}
	}
	if err := refs.userCredentials(creds, cluster, auth); err != nil {
		return nil, err
	}
	return creds, nil
}

// kubeconfigContext is the cluster and user of one context of a kubeconfig (its current one when
// contextName is empty).
func kubeconfigContext(data []byte, contextName string, src kubeconfigSource) (*clientcmdapi.Cluster, *clientcmdapi.AuthInfo, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		// The parser's message can quote the document, which holds credentials.
		return nil, nil, fmt.Errorf("%s is not a valid kubeconfig", src.desc)
	}
	if contextName == "" {
		contextName = cfg.CurrentContext
	}
	kctx := cfg.Contexts[contextName]
	if kctx == nil {
		return nil, nil, fmt.Errorf("%s has no such context (config.context, or its current-context)", src.desc)
	}
	cluster, auth := cfg.Clusters[kctx.Cluster], cfg.AuthInfos[kctx.AuthInfo]
	if cluster == nil || auth == nil {
		return nil, nil, fmt.Errorf("%s: the context names a cluster or user it does not define", src.desc)
	}
	return cluster, auth, nil
}

// userCredentials sets creds from the context's user: one kind of credential, its files and exec
// plugin checked by the caller's rules.
func (r kubeconfigRefs) userCredentials(creds *Credentials, cluster *clientcmdapi.Cluster, auth *clientcmdapi.AuthInfo) error {
	desc := r.src.desc
	var err error
	switch {
	case auth.Token != "":
		creds.BearerToken = auth.Token
	case auth.TokenFile != "":
		if creds.TokenFile, err = r.credentialFile("tokenFile", auth.TokenFile); err != nil {
			return fmt.Errorf("%s: tokenFile: %w", desc, err)
		}
	case len(auth.ClientCertificateData) > 0 || auth.ClientCertificate != "":
		return r.clientCertificate(creds, auth)
	case auth.Exec != nil:
		if err := r.checkRef("exec plugin"); err != nil {
			return err
		}
		spec := ExecSpec{
			Command:            auth.Exec.Command,
			Args:               auth.Exec.Args,
			Env:                auth.Exec.Env,
			APIVersion:         auth.Exec.APIVersion,
			ProvideClusterInfo: auth.Exec.ProvideClusterInfo,
			ClusterConfig:      extensionJSON(cluster.Extensions[execExtension]),
		}
		creds.Exec, err = r.req.exec(spec, desc+": the context's user", r.src.callerOwned)
		return err
	case auth.AuthProvider != nil:
		return fmt.Errorf("%s: the context's user uses a legacy auth-provider; use an exec plugin", desc)
	case auth.Username != "" || auth.Password != "":
		return fmt.Errorf("%s: the context's user uses basic auth, which is not supported", desc)
	default:
		return fmt.Errorf("%s: the context's user has no credentials", desc)
	}
	return nil
}

// clientCertificate sets creds' certificate and key from the context's user, inline or from files.
func (r kubeconfigRefs) clientCertificate(creds *Credentials, auth *clientcmdapi.AuthInfo) error {
	desc := r.src.desc
	var err error
	creds.CertData, creds.KeyData = clone(auth.ClientCertificateData), clone(auth.ClientKeyData)
	if len(creds.CertData) == 0 {
		if creds.CertData, err = r.readCredential("client-certificate file", auth.ClientCertificate); err != nil {
			return fmt.Errorf("%s: client-certificate: %w", desc, err)
		}
	}
	if len(creds.KeyData) == 0 && auth.ClientKey != "" {
		if creds.KeyData, err = r.readCredential("client-key file", auth.ClientKey); err != nil {
			return fmt.Errorf("%s: client-key: %w", desc, err)
		}
	}
	if len(creds.KeyData) == 0 {
		return fmt.Errorf("%s: the context's user has a client certificate but no key", desc)
	}
	return nil
}

// kubeconfigRefs reads what a kubeconfig names on the caller's side (files, exec plugins), checked
// by the caller's rules.
type kubeconfigRefs struct {
	req *Request
	src kubeconfigSource
}

// checkRef refuses what names the caller's side unless the kubeconfig is the caller's, or the
// caller allows a kubeconfig Secret to.
func (r kubeconfigRefs) checkRef(what string) error {
	if r.src.callerOwned || r.req.resolver.opts.AllowKubeconfigSecretRefs {
		return nil
	}
	return fmt.Errorf("%w: %s: its %s is on the caller's side; a kubeconfig Secret may name the caller's files and exec plugins only with ResolverOptions.AllowKubeconfigSecretRefs",
		ErrNotAllowed, r.src.desc, what)
}

// path is p relative to the kubeconfig's directory, when it has one.
func (r kubeconfigRefs) path(p string) string {
	if r.src.baseDir != "" && !filepath.IsAbs(p) {
		return filepath.Join(r.src.baseDir, p)
	}
	return p
}

func (r kubeconfigRefs) readCA(p string) ([]byte, error) {
	if err := r.checkRef("certificate-authority file"); err != nil {
		return nil, err
	}
	_, data, err := r.req.ReadFile(r.path(p))
	return data, err
}

// credentialFile resolves a credential file's path. It is tied to the kubeconfig's server when
// the kubeconfig is the caller's, and to its FileRoot's SendTo otherwise.
func (r kubeconfigRefs) credentialFile(what, p string) (string, error) {
	if err := r.checkRef(what); err != nil {
		return "", err
	}
	if r.src.callerOwned {
		return r.req.ResolvePath(r.path(p))
	}
	return r.req.CredentialFile(r.path(p))
}

func (r kubeconfigRefs) readCredential(what, p string) ([]byte, error) {
	resolved, err := r.credentialFile(what, p)
	if err != nil {
		return nil, err
	}
	return readResolved(resolved)
}

// extensionJSON is a kubeconfig extension's content as JSON, nil when there is none. clientcmd
// loads extensions as runtime.Unknown holding the raw JSON.
func extensionJSON(ext runtime.Object) json.RawMessage {
	switch e := ext.(type) {
	case nil:
		return nil
	case *runtime.Unknown:
		return e.Raw
	default:
		b, _ := json.Marshal(e) // a value that does not serialize offers no config
		return b
	}
}

// readResolved reads a file whose path ResolvePath or CredentialFile already resolved, so that its
// links are not followed twice; errors leave the path out.
func readResolved(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, withoutPath(err)
	}
	return data, nil
}
