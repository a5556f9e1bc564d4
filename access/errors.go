package access

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/answercap"
)

// Sentinel errors, for errors.Is. The typed errors below wrap them with what the caller needs to
// act: which cluster, which provider, what to change.
var (
	// ErrNoUsableProvider: none of the cluster's providers, in the caller's order of preference,
	// resolved to credentials.
	ErrNoUsableProvider = errors.New("no usable auth provider")
	// ErrUnpinnedSecret: credentials would be sent to a server their Secret (or kubeconfig) does
	// not name, or, for the caller's own credentials, that the caller's options do not allow.
	ErrUnpinnedSecret = errors.New("credentials not pinned to this server")
	// ErrNotAllowed: the caller's options do not allow what the provider asks for (another
	// namespace, an exec command, a file path).
	ErrNotAllowed = errors.New("not allowed by the resolver's options")
	// ErrUnknownProviderType: no provider is registered for the type.
	ErrUnknownProviderType = errors.New("unknown auth provider type")
	// ErrAnswerTooLarge: a member's answer was longer than ResolverOptions.MaxAnswerBytes, and
	// was read no further.
	ErrAnswerTooLarge = answercap.ErrTooLarge
)

// ClusterError is the error the Resolver returns: it names the cluster and, when one was chosen,
// the provider, and wraps the cause.
type ClusterError struct {
	Namespace, Name string
	// Provider is the name of the auth provider involved, if any.
	Provider string
	Err      error
}

func (e *ClusterError) Error() string {
	if e.Provider != "" {
		return fmt.Sprintf("cluster %s/%s: provider %q: %v", e.Namespace, e.Name, e.Provider, e.Err)
	}
	return fmt.Sprintf("cluster %s/%s: %v", e.Namespace, e.Name, e.Err)
}

func (e *ClusterError) Unwrap() error { return e.Err }

// ProviderError records why one auth provider did not resolve.
type ProviderError struct {
	Provider, Type string
	Err            error
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("%s (%s): %v", e.Provider, e.Type, e.Err)
}

func (e *ProviderError) Unwrap() error { return e.Err }

// NoProviderError lists, for every provider of the cluster, why it was not used. It matches
// ErrNoUsableProvider, and through Unwrap each provider's own cause.
type NoProviderError struct {
	// Preferred is the caller's order of types; empty means the cluster's own order.
	Preferred []string
	Reasons   []*ProviderError
}

func (e *NoProviderError) Error() string {
	if len(e.Reasons) == 0 {
		return "no auth providers"
	}
	parts := make([]string, len(e.Reasons))
	for i, r := range e.Reasons {
		parts[i] = r.Error()
	}
	return fmt.Sprintf("no usable auth provider: %s", strings.Join(parts, "; "))
}

func (e *NoProviderError) Unwrap() []error {
	errs := []error{ErrNoUsableProvider}
	for _, r := range e.Reasons {
		errs = append(errs, r)
	}
	return errs
}

// PinningError says that credentials would go to a server their store, or the caller, does not
// tie them to, and how to allow it if that server is the right one. The store is a Secret or a
// kubeconfig file; credentials from the caller's side (files, exec plugins) are tied to servers by
// the caller's options.
type PinningError struct {
	// Secret is the Secret's namespace/name, when the credentials came from one.
	Secret string
	// File is the kubeconfig file's path, when the credentials came from one.
	File string
	// Option is the caller's option that ties the credentials to servers (such as
	// "ResolverOptions.ExecPlugins[0].SendTo"), when they come from the caller's side.
	Option string
	// Server is where the Cluster would send the credentials.
	Server string
	// Allowed are the servers the store names; empty when it names none.
	Allowed []string
	// Agent is the tunnel agent the Cluster reaches Server through ("" when it dials it), and
	// PinnedAgent the one the Secret's v1alpha1.TunnelAgentAnnotation names, when they differ.
	Agent, PinnedAgent string
	// tunnel is set when the refusal is of the tunnel, not of the server.
	tunnel bool
}

// through says how a member is reached, for errors: through which agent, or directly.
func through(agent string) string {
	if agent == "" {
		return "dialled directly"
	}
	return fmt.Sprintf("reached through tunnel agent %q", agent)
}

func (e *PinningError) Error() string {
	if e.tunnel {
		return e.tunnelError()
	}
	if e.Option != "" {
		return fmt.Sprintf("%s does not allow sending these credentials of the caller's to %s; if that server is right, allow it there",
			e.Option, e.Server)
	}
	if e.File != "" {
		return fmt.Sprintf("kubeconfig %s gives its credentials for %s, not for %s; the Cluster's endpoint and the kubeconfig must name the same server",
			e.File, strings.Join(e.Allowed, ", "), e.Server)
	}
	if len(e.Allowed) == 0 {
		return fmt.Sprintf("Secret %s names no servers its credentials may be sent to; if %s is right, annotate the Secret with %s=%s",
			e.Secret, e.Server, annotationServers, e.Server)
	}
	return fmt.Sprintf("Secret %s pins its credentials to %s, not to %s; if %s is right, add it to the Secret's %s annotation",
		e.Secret, strings.Join(e.Allowed, ", "), e.Server, e.Server, annotationServers)
}

func (e *PinningError) tunnelError() string {
	if e.Secret == "" {
		from := e.Option
		if from == "" {
			from = "kubeconfig " + e.File
		}
		return fmt.Sprintf("%s is %s, and credentials of the caller's (%s) are never sent through a tunnel agent that a Cluster names; give the member a Secret of its own",
			e.Server, through(e.Agent), from)
	}
	if e.PinnedAgent == "" {
		return fmt.Sprintf("Secret %s is for members dialled directly, and %s is %s; if that is right, annotate the Secret with %s=%s",
			e.Secret, e.Server, through(e.Agent), v1alpha1.TunnelAgentAnnotation, e.Agent)
	}
	return fmt.Sprintf("Secret %s pins its credentials to members %s, and %s is %s; the Cluster's tunnel and the Secret's %s annotation must agree",
		e.Secret, through(e.PinnedAgent), e.Server, through(e.Agent), v1alpha1.TunnelAgentAnnotation)
}

func (e *PinningError) Unwrap() error { return ErrUnpinnedSecret }
