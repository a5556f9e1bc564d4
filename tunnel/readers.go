package tunnel

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// readerGrantTTL is how long the registry's answer for one reader and one cluster set is kept: a
// tool opens many connections, and a revoked right is honoured within it.
const readerGrantTTL = 30 * time.Second

// readerGrants asks the registry whether a reader may reach the members of a cluster set: whether
// it may get that set's Clusters itself. The reader is who its client certificate names: the
// common name its user, the organizations its groups, as a Kubernetes API server reads one.
type readerGrants struct {
	s  *Server
	mu sync.Mutex
	// answers are the registry's, by user, groups and namespace, until they expire.
	answers map[string]grant
}

type grant struct {
	allowed bool
	until   time.Time
}

// reader is the identity a frontend stream's client certificate gives.
func reader(ctx context.Context) (*x509.Certificate, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return nil, false
	}
	return info.State.PeerCertificates[0], true
}

// check says why the reader may not reach host's cluster set, or "" if it may.
func (g *readerGrants) check(ctx context.Context, host string) string {
	cert, ok := reader(ctx)
	if !ok {
		return "the reader presented no client certificate"
	}
	namespace, ok := setOf(host)
	if !ok {
		return "the tunnel reaches members by their agents' names (access.TunnelHost)"
	}
	user, groups := cert.Subject.CommonName, slices.Sorted(slices.Values(cert.Subject.Organization))
	key := user + "\x00" + strings.Join(groups, "\x00") + "\x00" + namespace
	g.mu.Lock()
	a, cached := g.answers[key]
	g.mu.Unlock()
	if !cached || time.Now().After(a.until) {
		allowed, err := g.ask(ctx, user, groups, namespace)
		if err != nil {
			return fmt.Sprintf("asking the registry whether reader %q may read cluster set %s: %v", user, namespace, err)
		}
		a = grant{allowed: allowed, until: time.Now().Add(readerGrantTTL)}
		g.remember(key, a)
	}
	if !a.allowed {
		return fmt.Sprintf("reader %q (its client certificate's common name) may not get the Clusters of cluster set %s in the registry, so it reaches none of their members", user, namespace)
	}
	return ""
}

// remember keeps an answer, and forgets the expired ones once there are many: each reader and set
// a certificate of the readers' CA names would otherwise stay for the server's life.
func (g *readerGrants) remember(key string, a grant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.answers) >= 1024 {
		now := time.Now()
		for k, old := range g.answers {
			if now.After(old.until) {
				delete(g.answers, k)
			}
		}
	}
	g.answers[key] = a
}

// ask is the registry's SubjectAccessReview of get on the set's Clusters.
func (g *readerGrants) ask(ctx context.Context, user string, groups []string, namespace string) (bool, error) {
	review, err := g.s.opts.Registry.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: "get", Group: v1alpha1.GroupName, Resource: "clusters",
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// setOf is the cluster set of an agent's name, agent.namespace + access.TunnelHostSuffix.
func setOf(host string) (string, bool) {
	rest, ok := strings.CutSuffix(host, access.TunnelHostSuffix)
	if !ok {
		return "", false
	}
	_, namespace, ok := strings.Cut(rest, ".")
	return namespace, ok && namespace != "" && !strings.Contains(namespace, ".")
}
