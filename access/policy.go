package access

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// annotationServers is the pinning annotation on credential Secrets.
const annotationServers = v1alpha1.ServersAnnotation

// Secret reads a Secret for the provider, in the Cluster's own namespace when namespace is empty.
// Another namespace is read only when the caller's ResolverOptions.SecretNamespaces allows it: whoever
// can edit a Cluster must not be able to point the caller at Secrets outside their cluster set.
// Names that are not valid object names are refused without being repeated: they may be a
// credential pasted into the wrong key.
func (r *Request) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	if name == "" {
		return nil, errors.New("config.name is required: the Secret to read")
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, errors.New("config.name is not a valid Secret name")
	}
	if namespace == "" {
		namespace = r.Cluster.Namespace
	}
	if len(validation.IsDNS1123Label(namespace)) > 0 {
		return nil, errors.New("config.namespace is not a valid namespace name")
	}
	if namespace != r.Cluster.Namespace && !slices.Contains(r.resolver.opts.SecretNamespaces, namespace) && !slices.Contains(r.resolver.opts.SecretNamespaces, "*") {
		return nil, fmt.Errorf("%w: Secret %s/%s is outside the cluster's namespace %s; allow it with ResolverOptions.SecretNamespaces",
			ErrNotAllowed, namespace, name, r.Cluster.Namespace)
	}
	if r.resolver.opts.Secrets == nil {
		return nil, fmt.Errorf("%w: reading Secret %s/%s needs ResolverOptions.Secrets", ErrNotAllowed, namespace, name)
	}
	s, err := r.resolver.opts.Secrets.GetSecret(ctx, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	return s, nil
}

// CheckPinned reports whether a Secret's credentials may be sent to the request's Server: the
// Secret must name that server in its clusterregistry.k8s.io/servers annotation, or among
// alsoAllowed (a kubeconfig Secret's own server). Whoever can edit a Cluster can change its
// endpoint; pinning keeps such an edit from redirecting the credentials to a server of theirs.
// ResolverOptions.AllowUnpinnedSecrets turns the check off for Secrets that name no servers at all.
//
// A tunnelled Cluster's credentials are pinned to its agent too (v1alpha1.TunnelAgentAnnotation):
// its server is an address in the member's own network, and whoever answers for the agent answers
// for that address.
func (r *Request) CheckPinned(secret *corev1.Secret, alsoAllowed ...string) error {
	return checkPinned(secret, r.Server.String(), tunnelAgent(r.Cluster), r.resolver.opts.AllowUnpinnedSecrets, alsoAllowed...)
}

// tunnelAgent is the agent the Cluster is reached through, "" when it is dialled directly.
func tunnelAgent(c *v1alpha1.Cluster) string {
	if t := c.Spec.KubernetesAPIEndpoints.Tunnel; t != nil {
		return t.Agent
	}
	return ""
}

// callerPinned refuses a tunnelled Cluster the caller's own credentials (an exec plugin's, a file
// under a FileRoot, a kubeconfig of the caller's): their pins name servers, and a tunnelled
// server is an address in a network the caller does not see, answered for by whichever agent the
// Cluster names.
func (r *Request) callerPinned(option, file string) error {
	if agent := tunnelAgent(r.Cluster); agent != "" {
		return &PinningError{Option: option, File: file, Server: r.Server.String(), Agent: agent, tunnel: true}
	}
	return nil
}

// CheckPinned reports whether secret's credentials may be sent to the resolved member's Server,
// by the rule the Resolver applied when it resolved: for whoever reads a Secret again after
// resolving (a rotator renewing its token), since the Secret may have changed since.
func (a *Resolved) CheckPinned(secret *corev1.Secret) error {
	allowUnpinned := a.owner != nil && a.owner.opts.AllowUnpinnedSecrets
	return checkPinned(secret, a.Server.String(), a.tunnelAgent, allowUnpinned)
}

func checkPinned(secret *corev1.Secret, want, agent string, allowUnpinned bool, alsoAllowed ...string) error {
	pinnedAgent := secret.Annotations[v1alpha1.TunnelAgentAnnotation]
	unpinned := secret.Annotations[annotationServers] == "" && pinnedAgent == "" && len(alsoAllowed) == 0
	if pinnedAgent != agent && !(unpinned && allowUnpinned) {
		return &PinningError{Secret: secret.Namespace + "/" + secret.Name, Server: want, Agent: agent, PinnedAgent: pinnedAgent, tunnel: true}
	}
	var allowed []string
	for _, s := range strings.Split(secret.Annotations[annotationServers], ",") {
		if s = strings.TrimSpace(s); s != "" {
			allowed = append(allowed, s)
		}
	}
	allowed = append(allowed, alsoAllowed...)
	if len(allowed) == 0 && allowUnpinned {
		return nil
	}
	for _, a := range allowed {
		if u, err := ServerURL(a); err == nil && u.String() == want {
			return nil
		}
	}
	return &PinningError{Secret: secret.Namespace + "/" + secret.Name, Server: want, Allowed: allowed}
}

// ReadFile reads a file named by the provider's config, which ResolvePath must allow, and returns
// its resolved path with its content. It is for files whose content is not sent to the member as
// it is (a kubeconfig, a CA); for a credential use CredentialFile.
func (r *Request) ReadFile(path string) (resolved string, data []byte, err error) {
	if resolved, err = r.ResolvePath(path); err != nil {
		return "", nil, err
	}
	if data, err = readResolved(resolved); err != nil {
		return "", nil, err
	}
	return resolved, data, nil
}

// ResolvePath returns the absolute path, links followed, of a file named by the provider's config,
// if it lies under one of the caller's ResolverOptions.FileRoots: a Cluster is written by others, and must
// not be able to make the caller read, and send as a credential, any file it can reach. A leading
// "~/" is the caller's home directory. Errors do not repeat the path.
func (r *Request) ResolvePath(path string) (string, error) {
	clean, _, err := r.resolvePath(path)
	return clean, err
}

// CredentialFile is ResolvePath for a file whose content is a credential sent to the member (a
// token file, a client certificate or key): the FileRoot it lies under must send to the
// request's server (FileRoot.SendTo).
func (r *Request) CredentialFile(path string) (string, error) {
	clean, root, err := r.resolvePath(path)
	if err != nil {
		return "", err
	}
	if err := r.checkSendTo(root); err != nil {
		return "", err
	}
	return clean, nil
}

func (r *Request) checkSendTo(root int) error {
	if err := r.callerPinned(fmt.Sprintf("ResolverOptions.FileRoots[%d].SendTo", root), ""); err != nil {
		return err
	}
	if m := r.resolver.opts.FileRoots[root].SendTo; m != nil && m.MatchServer(r.Cluster, r.Server) {
		return nil
	}
	return &PinningError{Option: fmt.Sprintf("ResolverOptions.FileRoots[%d].SendTo", root), Server: r.Server.String()}
}

// resolvePath returns the clean path and the index of the root it lies under.
func (r *Request) resolvePath(path string) (string, int, error) {
	if path == "" {
		return "", 0, errors.New("a path is required")
	}
	expanded, err := expandHome(path)
	if err != nil {
		return "", 0, err
	}
	abs, err := filepath.Abs(expanded)
	if err != nil {
		return "", 0, withoutPath(err)
	}
	// Follow links first, so that a link under a root cannot lead outside it. (A projected token is
	// a chain of links within its own directory.)
	clean, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", 0, withoutPath(err)
	}
	for i, root := range r.resolver.fileRoots {
		if rel, err := filepath.Rel(root, clean); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return clean, i, nil
		}
	}
	return "", 0, fmt.Errorf("%w: the path is not under any of ResolverOptions.FileRoots", ErrNotAllowed)
}

// withoutPath drops the path from a file system error: the path came from a Cluster or a Secret,
// and may be a pasted credential rather than a path.
func withoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

func expandHome(path string) (string, error) {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expanding ~: %w", err)
	}
	return filepath.Join(home, strings.TrimPrefix(path, "~")), nil
}
