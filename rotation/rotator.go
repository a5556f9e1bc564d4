package rotation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/boundtoken"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/election"
	"github.com/cluster-registry/sdk/internal/answercap"
	"github.com/cluster-registry/sdk/multicluster"
)

// Members is what a Rotator renews the tokens of: a *multicluster.Fleet, or a fixed set.
type Members interface {
	Members() []*multicluster.Member
}

// Options configure a Rotator.
type Options struct {
	// Kube reads and writes the credential Secrets in the registry. Required.
	Kube kubernetes.Interface
	// TTL is the lifetime each new token is asked for; by default the current token's own
	// (exp less iat). A member may give a shorter one: its answer's expiry is what is recorded.
	TTL time.Duration
	// RenewAt is the fraction of a token's life after which it is renewed; 2/3 by default.
	RenewAt float64
	// Interval is how often Run looks for tokens due; a minute by default.
	Interval time.Duration
	// Concurrency is how many renewals run at once; 8 by default. Tokens of members joined
	// together come due together, and each renewal waits on the member four times.
	Concurrency int
	// Timeout bounds each step of a renewal that waits on the member (asking for the new token;
	// revoking the replaced one), the reading of answers included; 30s by default. A member that
	// does not answer in time is tried again at the next pass and holds back no other member.
	// Answers are read to at most 1 MiB whatever the time: a token's is a few KiB.
	Timeout time.Duration
	// Logger hears each renewal and each failure, never a token; discarded by default.
	Logger logr.Logger
	// LeaderElection, if set, makes replicas of the Rotator take turns: only the holder of a
	// Lease in the registry renews, so that a member is asked for one token per renewal, not
	// one per replica. Nil runs without election.
	LeaderElection *LeaderElection
}

// LeaderElection names the Lease that replicas of the Rotator contend for: election.Lease, the
// one type of every controller of the SDK. Its Name is "clusterregistry-rotation" by default.
type LeaderElection = election.Lease

// ErrLostLeadership is Run's error when the Rotator led and could no longer renew its Lease:
// another replica may renew now, so this one stops. Restart it to contend again. It is
// election.ErrLostLeadership, whichever controller lost.
var ErrLostLeadership = election.ErrLostLeadership

// Rotator renews the tokens of members whose credential Secrets name their service account.
type Rotator struct {
	members Members
	opts    Options
	// due is, by Secret, when its token is next due, as last read: a pass reads a Secret only
	// once that time has come, not every Secret at every pass.
	due sync.Map
	// next is, by Secret, when its token comes due (a Due), as last read: NextDue's answer, and
	// when Run next looks.
	next sync.Map
}

// Due is when a member's token comes due for renewal.
type Due struct {
	Member types.NamespacedName
	Secret types.NamespacedName
	At     time.Time
}

// NextDue is the token that comes due first, of those the last pass read (RenewDue, or Run's);
// false when it read none that will come due.
func (r *Rotator) NextDue() (Due, bool) {
	var first Due
	found := false
	r.next.Range(func(_, v any) bool {
		if d := v.(Due); !found || d.At.Before(first.At) {
			first, found = d, true
		}
		return true
	})
	return first, found
}

// New returns a Rotator of the members' tokens.
func New(members Members, opts Options) (*Rotator, error) {
	if opts.Kube == nil {
		return nil, errors.New("rotation: Options.Kube is required: it reads and writes the credential Secrets")
	}
	if opts.RenewAt == 0 {
		opts.RenewAt = 2.0 / 3
	}
	if opts.RenewAt <= 0 || opts.RenewAt >= 1 {
		return nil, fmt.Errorf("rotation: Options.RenewAt is %v, want a fraction between 0 and 1", opts.RenewAt)
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if le := opts.LeaderElection; le != nil {
		copied := *le
		copied.Name = cmp.Or(le.Name, "clusterregistry-rotation")
		copied = copied.Defaulted()
		opts.LeaderElection = &copied
		if err := copied.Validate(); err != nil {
			return nil, fmt.Errorf("rotation: Options.LeaderElection: %w", err)
		}
	}
	return &Rotator{members: members, opts: opts}, nil
}

// Run renews what is due every Interval until ctx is done. With LeaderElection, it first waits to
// hold the Lease, and returns ErrLostLeadership if it loses it.
func (r *Rotator) Run(ctx context.Context) error {
	le := r.opts.LeaderElection
	if le == nil {
		return r.run(ctx)
	}
	err := election.Run(ctx, r.opts.Kube.CoordinationV1(), *le, r.opts.Logger, r.run)
	if ctx.Err() != nil {
		return nil // as without election
	}
	return err
}

// run is Run without election.
func (r *Rotator) run(ctx context.Context) error {
	for {
		_, errs := r.RenewDue(ctx)
		for _, err := range errs {
			r.opts.Logger.Error(err, "could not renew a member's token; retrying at the next pass")
		}
		timer := time.NewTimer(r.untilNextPass(time.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

// minPassGap keeps passes apart when tokens come due one right after another.
const minPassGap = time.Second

// untilNextPass is how long Run waits for its next pass: Interval, or less when a token comes due
// sooner, so that a short-lived token is renewed when due and not up to an Interval late (late
// enough, for a token of minutes, for the health controller to report CredentialsExpiring).
func (r *Rotator) untilNextPass(now time.Time) time.Duration {
	wait := r.opts.Interval
	if d, ok := r.NextDue(); ok {
		if until := d.At.Sub(now); until < wait {
			wait = max(until, minPassGap)
		}
	}
	return wait
}

// Renewal is one token renewed: the member, its Secret and the new token's expiry.
type Renewal struct {
	Member  types.NamespacedName
	Secret  types.NamespacedName
	Expires time.Time
	// Revoked is how many replaced tokens were revoked: deleted their bound Secrets.
	Revoked int
	// Agent, for the token of a tunnelled member's agent, names the agent; Secret is then the
	// agent's Secret on the member.
	Agent string
}

// fieldManager is who writes what the Rotator writes.
const fieldManager = "clusterregistry-rotation"

// RenewDue renews every token that is due, once per Secret however many Clusters use it, and
// returns what it renewed and, apart, each failure, naming the member and the Secret.
func (r *Rotator) RenewDue(ctx context.Context) ([]Renewal, []error) {
	return r.renewDue(ctx, time.Now())
}

func (r *Rotator) renewDue(ctx context.Context, now time.Time) ([]Renewal, []error) {
	type job struct {
		m      *multicluster.Member
		secret types.NamespacedName
		agent  bool
	}
	var jobs []job
	seen := map[types.NamespacedName]bool{}
	for _, m := range r.members.Members() {
		if key, ok := agentKey(m.Cluster()); ok && !seen[key] {
			seen[key] = true
			jobs = append(jobs, job{m, key, true})
		}
		secret, ok := tokenSecret(m.Cluster())
		if !ok || seen[secret] {
			continue
		}
		seen[secret] = true
		jobs = append(jobs, job{m, secret, false})
	}
	r.next.Range(func(k, _ any) bool {
		if !seen[k.(types.NamespacedName)] {
			r.next.Delete(k) // its member left, or no longer points at it
		}
		return true
	})
	var mu sync.Mutex
	var done []Renewal
	var errs []error
	g := errgroup.Group{}
	g.SetLimit(r.opts.Concurrency)
	for _, j := range jobs {
		g.Go(func() error {
			renew := r.renewIfDue
			if j.agent {
				renew = r.renewAgentIfDue
			}
			renewal, err := renew(ctx, j.m, j.secret, now)
			if err != nil && renewal == nil {
				r.next.Delete(j.secret) // not known until a pass renews or reads it
			}
			if err == nil && renewal == nil {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				what := "Secret " + j.secret.String()
				if j.agent {
					what = "its tunnel agent's token"
				}
				errs = append(errs, fmt.Errorf("member %s, %s: %w", j.m, what, err))
			}
			if renewal != nil {
				done = append(done, *renewal)
				r.opts.Logger.Info("renewed a member's token", "cluster", j.m.String(), "secret", renewal.Secret.String(),
					"expires", renewal.Expires.UTC().Format(time.RFC3339), "revoked", renewal.Revoked, "tunnelAgent", renewal.Agent)
			}
			return nil
		})
	}
	_ = g.Wait()
	return done, errs
}

// dueAt is when a pass should next read the Secret of a token of that life: when it is due, or
// ten passes from now if sooner, since the Secret may get another token meanwhile (join again).
func (r *Rotator) dueAt(now, expires time.Time, life time.Duration) time.Time {
	due := expires.Add(-time.Duration(float64(life) * (1 - r.opts.RenewAt)))
	if reread := now.Add(10 * r.opts.Interval); reread.Before(due) {
		due = reread
	}
	return due
}

// tokenSecret is the Secret of the Cluster's first secret provider, as access.SecretOf says: in
// the namespace its config names, not always the Cluster's (a Secret of the same name in the
// Cluster's namespace is another credential, pinned to other servers).
func tokenSecret(c *v1alpha1.Cluster) (types.NamespacedName, bool) {
	for _, p := range c.Spec.AuthInfo.Providers {
		if p.Type.Name == v1alpha1.ProviderTypeSecret {
			return access.SecretOf(c, p)
		}
	}
	return types.NamespacedName{}, false
}

// resolvedWith checks that the member's resolution, a, read the Secret key: the token read from
// key goes to a's server, so it must be the credential a's pinning was checked for, read within
// the Resolver's policy (another namespace only where it is allowed).
func resolvedWith(m *multicluster.Member, a *access.Resolved, key types.NamespacedName) error {
	c := m.Cluster()
	for _, p := range c.Spec.AuthInfo.Providers {
		if p.Name != a.Provider {
			continue
		}
		if ref, ok := access.SecretOf(c, p); ok && p.Type.Name == v1alpha1.ProviderTypeSecret && ref == key {
			return nil
		}
		break
	}
	return fmt.Errorf("the member is reached with provider %q, not with Secret %s: its token is not renewed on that account", a.Provider, key)
}

// renewIfDue asks the member for a new token when the Secret's is due, with the current one, and
// revokes the one it replaces. It returns the renewal and an error both when the renewal was
// done but the revocation was not.
func (r *Rotator) renewIfDue(ctx context.Context, m *multicluster.Member, key types.NamespacedName, now time.Time) (*Renewal, error) {
	if due, ok := r.due.Load(key); ok && now.Before(due.(time.Time)) {
		return nil, nil
	}
	a, s, err := r.joinedSecret(ctx, m, key)
	if err != nil || s == nil {
		return nil, err
	}
	account := s.Annotations[v1alpha1.ServiceAccountAnnotation]
	saNamespace, saName, ok := strings.Cut(account, "/")
	if !ok || saNamespace == "" || saName == "" {
		return nil, fmt.Errorf("annotation %s is %q, want namespace/name", v1alpha1.ServiceAccountAnnotation, account)
	}
	issued, expires := access.TokenExpiry(string(s.Data[v1alpha1.SecretTokenKey]))
	if expires.IsZero() {
		return nil, fmt.Errorf("its token does not say when it expires, so it is not renewed; join again for one that does")
	}
	life := expires.Sub(issued)
	if issued.IsZero() || life <= 0 {
		life = r.opts.TTL
	}
	if due := expires.Add(-time.Duration(float64(life) * (1 - r.opts.RenewAt))); now.Before(due) {
		r.due.Store(key, r.dueAt(now, expires, life))
		r.next.Store(key, Due{Member: m.Name(), Secret: key, At: due})
		return nil, nil
	}
	ttl := r.opts.TTL
	if ttl <= 0 {
		ttl = life
	}
	t := renewing{a: a, secret: s, key: key, member: m.Name(), saNamespace: saNamespace, saName: saName, ttl: ttl, expires: expires}
	return r.renew(ctx, t, now)
}

// joinedSecret is the member's resolution and its Secret as read now, the Secret nil when join
// did not make it (it names no ServiceAccount): nothing this Rotator can renew.
func (r *Rotator) joinedSecret(ctx context.Context, m *multicluster.Member, key types.NamespacedName) (*access.Resolved, *corev1.Secret, error) {
	// The member's resolution first: it reads the Secret within the Resolver's policy and checks
	// its pinning, and the token read below goes to its server, so it must be the same Secret.
	a, err := m.Access(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := resolvedWith(m, a, key); err != nil {
		return nil, nil, err
	}
	s, err := r.opts.Kube.CoreV1().Secrets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the Secret: %w", err)
	}
	// Read again since the resolution: it must still pin its token to the resolution's server.
	if err := a.CheckPinned(s); err != nil {
		return nil, nil, err
	}
	if s.Annotations[v1alpha1.ServiceAccountAnnotation] == "" {
		return a, nil, nil
	}
	return a, s, nil
}

// renewing is one renewal's inputs: the member's resolution, its Secret as read, and the token's
// account, lifetime and current expiry.
type renewing struct {
	a           *access.Resolved
	secret      *corev1.Secret
	key         types.NamespacedName
	member      types.NamespacedName
	saNamespace string
	saName      string
	ttl         time.Duration
	expires     time.Time
}

// renew asks the member for a new token with the current one, writes it into the Secret, and
// revokes the replaced one where it is bound.
func (r *Rotator) renew(ctx context.Context, t renewing, now time.Time) (*Renewal, error) {
	// The requests go through the member's resolution (its pinning to the member's server, and
	// its CA) with the Secret's current token: the resolution may be older than the Secret.
	current := string(t.secret.Data[v1alpha1.SecretTokenKey])
	kube, done, err := withToken(t.a, current)
	if err != nil {
		return nil, err
	}
	defer done()
	bound := boundtoken.BoundSecret(current) != ""
	fresh, err := r.issue(ctx, kube, t, bound)
	if err != nil {
		return nil, fmt.Errorf("asking the member for a new token of %s/%s with the current one: %w", t.saNamespace, t.saName, err)
	}
	s := t.secret
	s.Data[v1alpha1.SecretTokenKey] = []byte(fresh.Token)
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[v1alpha1.TokenExpiresAnnotation] = fresh.ExpirationTimestamp.UTC().Format(time.RFC3339)
	if _, err := r.opts.Kube.CoreV1().Secrets(t.key.Namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		if bound { // nobody will use the new token: revoke it, and only it (another replica's may have won)
			cleanup, cancel := detached(ctx, r.opts.Timeout)
			defer cancel()
			_ = kube.Secrets(t.saNamespace).Delete(cleanup, boundtoken.BoundSecret(fresh.Token), metav1.DeleteOptions{})
		}
		return nil, fmt.Errorf("writing the new token into the Secret: %w", err)
	}
	r.due.Store(t.key, r.dueAt(now, fresh.ExpirationTimestamp.Time, t.ttl))
	r.next.Store(t.key, Due{Member: t.member, Secret: t.key,
		At: fresh.ExpirationTimestamp.Add(-time.Duration(float64(t.ttl) * (1 - r.opts.RenewAt)))})
	renewal := &Renewal{Member: t.member, Secret: t.key, Expires: fresh.ExpirationTimestamp.Time}
	if !bound {
		return renewal, nil
	}
	return renewal, r.revokeReplaced(ctx, t, renewal, fresh.Token)
}

// issue asks the member for a new token of the account, bound to a Secret of its own when the
// current one is.
func (r *Rotator) issue(ctx context.Context, kube corev1client.CoreV1Interface, t renewing, bound bool) (fresh *authenticationv1.TokenRequestStatus, err error) {
	if bound {
		err = r.atMember(ctx, func(ctx context.Context) (err error) {
			fresh, err = boundtoken.Issue(ctx, kube, t.saNamespace, t.saName, t.ttl)
			return err
		})
		return fresh, err
	}
	// A token of an earlier join, not bound to a Secret: its account may not make Secrets (it
	// lives in kube-system, where that would be unsafe), so its renewal is not bound either. Join
	// again to move it to a namespace of its own.
	seconds := int64(t.ttl.Seconds())
	err = r.atMember(ctx, func(ctx context.Context) error {
		tr, err := kube.ServiceAccounts(t.saNamespace).CreateToken(ctx, t.saName,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
		if err == nil {
			fresh = &tr.Status
		}
		return err
	})
	return fresh, err
}

// revokeReplaced makes the replaced token stop working. The request is sent with the new token:
// the member's cached resolution may still carry the one being revoked, which would be refused
// halfway.
func (r *Rotator) revokeReplaced(ctx context.Context, t renewing, renewal *Renewal, token string) error {
	renewed, doneRenewed, err := withToken(t.a, token)
	if err == nil {
		defer doneRenewed()
		err = r.atMember(ctx, func(ctx context.Context) (err error) {
			renewal.Revoked, err = boundtoken.Revoke(ctx, renewed, t.saNamespace, t.saName, token)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("renewed, but the replaced token still works until it expires at %s (the next renewal tries again): %w",
			t.expires.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// atMember runs a step that waits on the member with Options.Timeout, and says so when the
// step ran out of it.
func (r *Rotator) atMember(ctx context.Context, step func(context.Context) error) error {
	stepCtx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	err := step(stepCtx)
	if err != nil && ctx.Err() == nil && stepCtx.Err() != nil {
		return fmt.Errorf("the member did not answer within %s: %w", r.opts.Timeout, err)
	}
	return err
}

// maxAnswer bounds what the Rotator reads of one answer from a member (see answercap): the
// answers to its requests (a token, a Secret, a list of an account's bindings) are a few KiB.
const maxAnswer = 1 << 20

// withToken is a client of the member as resolved (its pinning and CA) that sends token in place
// of the resolution's credentials, and a func that closes what it opened.
func withToken(a *access.Resolved, token string) (corev1client.CoreV1Interface, func(), error) {
	cfg := rest.CopyConfig(a.Config)
	if a.HTTPClient != nil && cfg.BearerToken != "" && cfg.BearerTokenFile == "" && cfg.ExecProvider == nil && cfg.AuthProvider == nil &&
		len(cfg.CertData) == 0 && cfg.CertFile == "" && cfg.Username == "" {
		// The resolution sends a token and nothing else: send this one on its connections
		// instead (client-go's bearer round tripper leaves a request's Authorization alone).
		client := &http.Client{Transport: answercap.Wrap(maxAnswer)(bearer{token: "Bearer " + token, next: a.HTTPClient.Transport}), Timeout: a.HTTPClient.Timeout}
		core, err := corev1client.NewForConfigAndClient(cfg, client)
		return core, func() {}, err
	}
	cfg.BearerToken, cfg.BearerTokenFile = token, ""
	cfg.ExecProvider, cfg.AuthProvider, cfg.Username, cfg.Password = nil, nil, "", ""
	cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = nil, nil, "", ""
	cfg.Wrap(answercap.Wrap(maxAnswer))
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building a client of the member: %w", err)
	}
	core, err := corev1client.NewForConfigAndClient(cfg, client)
	if err != nil {
		return nil, nil, fmt.Errorf("building a client of the member: %w", err)
	}
	// http.Client.CloseIdleConnections stops at client-go's wrappers; this unwraps them.
	return core, func() { utilnet.CloseIdleConnectionsFor(client.Transport) }, nil
}

// bearer sets a request's Authorization before the resolution's transport sees it.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", b.token)
	return b.next.RoundTrip(req)
}
