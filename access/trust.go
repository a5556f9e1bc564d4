package access

import (
	"fmt"
	"net/url"
	"slices"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Credentials that come from the caller's side (a token file, a client certificate on disk, an
// exec plugin standing for a cloud identity) are the caller's own: whoever edits a Cluster must not
// be able to send them to a server of theirs by changing its endpoint. The caller ties each such
// source to the servers it may reach, with a ServerMatcher; the Resolver refuses any other.

// A ServerMatcher says whether credentials from the caller's side may be sent to a member's API
// server. The Resolver asks it for the server it chose from the Cluster's endpoints, before it
// reads or runs anything for that Cluster.
type ServerMatcher interface {
	MatchServer(c *v1alpha1.Cluster, server *url.URL) bool
}

// Servers matches the API servers listed, compared as ServerURL normalizes them, so that
// "member.example.com" and "https://member.example.com:443" are the same server. NewResolver
// reports an entry that is not a server address.
func Servers(servers ...string) ServerMatcher {
	list := serverList{given: servers}
	for _, s := range servers {
		u, err := ServerURL(s)
		if err != nil {
			list.err = fmt.Errorf("%q is not a server address: %w", s, err)
			break
		}
		list.servers = append(list.servers, u.String())
	}
	return list
}

type serverList struct {
	given, servers []string
	err            error
}

func (l serverList) MatchServer(_ *v1alpha1.Cluster, server *url.URL) bool {
	return slices.Contains(l.servers, server.String())
}

func (l serverList) validate() error { return l.err }

// ServerFunc adapts a function to ServerMatcher, for rules of the caller's own (a domain, a
// lookup in the caller's inventory). A rule that looks only at the Cluster's name or labels does
// not stop the Cluster's editor from moving its endpoint: match the server.
type ServerFunc func(c *v1alpha1.Cluster, server *url.URL) bool

// MatchServer calls f.
func (f ServerFunc) MatchServer(c *v1alpha1.Cluster, server *url.URL) bool { return f(c, server) }

// AnyServer matches every server. Use it only for credentials that are worth nothing to another
// server: an exec plugin that asks its issuer for a token bound to the server it is given
// (provideClusterInfo), or one that reads a credential meant for the named cluster only.
func AnyServer() ServerMatcher { return anyServer{} }

type anyServer struct{}

func (anyServer) MatchServer(*v1alpha1.Cluster, *url.URL) bool { return true }

// FileRoot lets providers read files under a directory of the caller's, and says where the
// credentials read there may be sent.
type FileRoot struct {
	// Dir is the directory. A leading "~/" is the caller's home directory. Links are followed, in
	// Dir and in the paths under it, before a path is checked against it.
	Dir string
	// SendTo says to which servers a credential read from a file under Dir (a token file, a client
	// certificate and key) may be sent. When nil, such files serve only a kubeconfig file of the
	// caller's (type kubeconfig-file), whose own server pins what it names: a Cluster's token-file
	// provider cannot use them.
	SendTo ServerMatcher
}

// validator is implemented by matchers that can be wrong from the start, such as Servers with a
// malformed address; NewResolver asks them.
type validator interface{ validate() error }

func validateMatcher(m ServerMatcher) error {
	if v, ok := m.(validator); ok {
		return v.validate()
	}
	return nil
}
