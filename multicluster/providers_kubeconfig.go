package multicluster

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigSecretCredentials reads a kubeconfig from a Secret, by Cluster API's convention: config
// "name" defaults to "<cluster>-kubeconfig" and "key" to "value"; "context" picks a context (the
// kubeconfig's current one by default). The kubeconfig's own server pins its credentials, as does
// the Secret's servers annotation.
func kubeconfigSecretCredentials(ctx context.Context, req *Request) (*Credentials, error) {
	s, err := req.Secret(ctx, req.Config("namespace", ""), req.Config("name", req.Cluster.Name+"-kubeconfig"))
	if err != nil {
		return nil, err
	}
	key := req.Config("key", "value")
	data := s.Data[key]
	if len(data) == 0 {
		return nil, fmt.Errorf("Secret %s/%s has no key %q", s.Namespace, s.Name, key)
	}
	source := fmt.Sprintf("Secret %s/%s key %q", s.Namespace, s.Name, key)
	return kubeconfigCredentials(req, data, req.Config("context", ""), source, "", func(server string) error {
		return req.CheckPinned(s, server)
	})
}

// kubeconfigFileCredentials reads a kubeconfig on the caller's machine: config "path" (under
// ResolverOptions.FileRoots) and "context". The Cluster's server must be the one the kubeconfig gives
// the credentials for.
func kubeconfigFileCredentials(_ context.Context, req *Request) (*Credentials, error) {
	path, data, err := req.ReadFile(req.Config("path", ""))
	if err != nil {
		return nil, err
	}
	return kubeconfigCredentials(req, data, req.Config("context", ""), "kubeconfig "+path, filepath.Dir(path), func(server string) error {
		if u, err := ServerURL(server); err == nil && u.String() == req.Server.String() {
			return nil
		}
		return &PinningError{File: path, Server: req.Server.String(), Allowed: []string{server}}
	})
}

// kubeconfigCredentials takes the credentials of one context of a kubeconfig. Files it names are
// read under the same FileRoots rule, relative to baseDir; exec plugins under the same
// ExecCommands rule. Its insecure-skip-tls-verify is ignored: that is the caller's choice alone.
func kubeconfigCredentials(req *Request, data []byte, contextName, source, baseDir string, pin func(server string) error) (*Credentials, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		// The parser's message can quote the document, which holds credentials.
		return nil, fmt.Errorf("%s is not a valid kubeconfig", source)
	}
	if contextName == "" {
		contextName = cfg.CurrentContext
	}
	kctx := cfg.Contexts[contextName]
	if kctx == nil {
		return nil, fmt.Errorf("%s has no context %q", source, contextName)
	}
	cluster, auth := cfg.Clusters[kctx.Cluster], cfg.AuthInfos[kctx.AuthInfo]
	if cluster == nil || auth == nil {
		return nil, fmt.Errorf("%s: context %q names a cluster or user it does not define", source, contextName)
	}
	if err := pin(cluster.Server); err != nil {
		return nil, err
	}

	readFile := func(path string) ([]byte, error) {
		if baseDir != "" && !filepath.IsAbs(path) {
			path = filepath.Join(baseDir, path)
		}
		_, data, err := req.ReadFile(path)
		return data, err
	}
	creds := &Credentials{CAData: clone(cluster.CertificateAuthorityData), TLSServerName: cluster.TLSServerName}
	if len(creds.CAData) == 0 && cluster.CertificateAuthority != "" {
		if creds.CAData, err = readFile(cluster.CertificateAuthority); err != nil {
			return nil, fmt.Errorf("%s: certificate-authority: %w", source, err)
		}
	}
	switch {
	case auth.Token != "":
		creds.BearerToken = auth.Token
	case auth.TokenFile != "":
		path := auth.TokenFile
		if baseDir != "" && !filepath.IsAbs(path) {
			path = filepath.Join(baseDir, path)
		}
		if creds.TokenFile, err = req.ResolvePath(path); err != nil {
			return nil, fmt.Errorf("%s: tokenFile: %w", source, err)
		}
	case len(auth.ClientCertificateData) > 0 || auth.ClientCertificate != "":
		creds.CertData, creds.KeyData = clone(auth.ClientCertificateData), clone(auth.ClientKeyData)
		if len(creds.CertData) == 0 {
			if creds.CertData, err = readFile(auth.ClientCertificate); err != nil {
				return nil, fmt.Errorf("%s: client-certificate: %w", source, err)
			}
		}
		if len(creds.KeyData) == 0 && auth.ClientKey != "" {
			if creds.KeyData, err = readFile(auth.ClientKey); err != nil {
				return nil, fmt.Errorf("%s: client-key: %w", source, err)
			}
		}
		if len(creds.KeyData) == 0 {
			return nil, fmt.Errorf("%s: user %q has a client certificate but no key", source, kctx.AuthInfo)
		}
	case auth.Exec != nil:
		if err := req.CheckExec(auth.Exec.Command); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		exec := auth.Exec.DeepCopy()
		exec.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
		creds.Exec = exec
	case auth.AuthProvider != nil:
		return nil, fmt.Errorf("%s: user %q uses the legacy auth-provider %q; use an exec plugin", source, kctx.AuthInfo, auth.AuthProvider.Name)
	case auth.Username != "" || auth.Password != "":
		return nil, fmt.Errorf("%s: user %q uses basic auth, which is not supported", source, kctx.AuthInfo)
	default:
		return nil, fmt.Errorf("%s: user %q has no credentials", source, kctx.AuthInfo)
	}
	return creds, nil
}
