package rotation

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// agentKey is how a pass tells a tunnelled member's agent token apart from the Secrets of
// members' tokens: by the agent's ServiceAccount, under a name no Secret can have.
func agentKey(c *v1alpha1.Cluster) (types.NamespacedName, bool) {
	t := c.Spec.KubernetesAPIEndpoints.Tunnel
	if t == nil {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: c.Namespace, Name: "tunnel-agent:" + t.Agent}, true
}

// renewAgentIfDue renews the token of a tunnelled member's agent once it is due, as join made it
// (join.TunnelOptions): a new token of the agent's ServiceAccount in the registry, which the
// set's agent.TokensRole lets the Rotator mint, written into the agent's Secret on the member
// with the member's own account, which join lets replace that Secret and nothing else of the
// agent's. The agent reads it at its next connection. The replaced token is left to expire: it
// is not bound to an object, and unjoin revokes every token of the agent at once.
func (r *Rotator) renewAgentIfDue(ctx context.Context, m *multicluster.Member, key types.NamespacedName, now time.Time) (*Renewal, error) {
	if due, ok := r.due.Load(key); ok && now.Before(due.(time.Time)) {
		return nil, nil
	}
	c := m.Cluster()
	agentName := c.Spec.KubernetesAPIEndpoints.Tunnel.Agent
	namespace, ok, err := r.accountNamespace(ctx, c)
	if err != nil || !ok {
		return nil, err
	}
	// The resolution holds the member's token Secret to the agent (its TunnelAgentAnnotation):
	// a Cluster's editor who names another agent gets no token of that agent minted.
	a, err := m.Access(ctx)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfigAndClient(a.Config, a.HTTPClient)
	if err != nil {
		return nil, err
	}
	secrets := kube.CoreV1().Secrets(namespace)
	var s *corev1.Secret
	err = r.atMember(ctx, func(ctx context.Context) (err error) {
		s, err = secrets.Get(ctx, agent.Name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) { // an agent set up by hand, not by join: not this Rotator's to renew
		r.due.Store(key, now.Add(10*r.opts.Interval))
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the tunnel agent's Secret %s/%s on the member: %w", namespace, agent.Name, err)
	}
	issued, expires := access.TokenExpiry(string(s.Data[agent.TokenKey]))
	life := expires.Sub(issued)
	if expires.IsZero() || issued.IsZero() || life <= 0 {
		return nil, fmt.Errorf("the tunnel agent's Secret %s/%s holds no token that says when it expires; join again", namespace, agent.Name)
	}
	at := expires.Add(-time.Duration(float64(life) * (1 - r.opts.RenewAt)))
	r.next.Store(key, Due{Member: m.Name(), Secret: types.NamespacedName{Namespace: namespace, Name: agent.Name}, At: at})
	if now.Before(at) {
		r.due.Store(key, r.dueAt(now, expires, life))
		return nil, nil
	}
	ttl := cmp.Or(r.opts.TTL, life)
	tr, err := r.opts.Kube.CoreV1().ServiceAccounts(c.Namespace).CreateToken(ctx, agentName, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{agent.Audience}, ExpirationSeconds: ptr.To(int64(ttl / time.Second)),
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("asking the registry for a token of the tunnel agent %s/%s (Role %s grants it): %w", c.Namespace, agentName, agent.TokensRole, err)
	}
	s.Data[agent.TokenKey] = []byte(tr.Status.Token)
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[v1alpha1.TokenExpiresAnnotation] = tr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339)
	if err := r.atMember(ctx, func(ctx context.Context) error {
		_, err := secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	}); err != nil {
		return nil, fmt.Errorf("writing the tunnel agent's new token into Secret %s/%s on the member: %w", namespace, agent.Name, err)
	}
	fresh := tr.Status.ExpirationTimestamp.Time
	r.due.Store(key, r.dueAt(now, fresh, ttl))
	r.next.Store(key, Due{Member: m.Name(), Secret: types.NamespacedName{Namespace: namespace, Name: agent.Name}, At: fresh.Add(-time.Duration(float64(ttl) * (1 - r.opts.RenewAt)))})
	return &Renewal{Member: m.Name(), Secret: types.NamespacedName{Namespace: namespace, Name: agent.Name}, Expires: fresh, Agent: agentName}, nil
}

// accountNamespace is the namespace, on the member, of the account join made for the Cluster,
// as its token Secret records it: where join put the agent. false when join made none.
func (r *Rotator) accountNamespace(ctx context.Context, c *v1alpha1.Cluster) (string, bool, error) {
	key, ok := tokenSecret(c)
	if !ok {
		return "", false, nil
	}
	s, err := r.opts.Kube.CoreV1().Secrets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("reading Secret %s, whose account's namespace holds the tunnel agent: %w", key, err)
	}
	ns, _, ok := strings.Cut(s.Annotations[v1alpha1.ServiceAccountAnnotation], "/")
	return ns, ok && ns != "", nil
}
