package fleetcache

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/internal/memberclients"
	"github.com/cluster-registry/sdk/multicluster"
)

// memberCaches are one member's informers, from when the member appeared (or was last reached
// differently) until it leaves. Its clients are built on the first kind to start.
type memberCaches struct {
	member *multicluster.Member
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu        sync.Mutex
	informers map[kindID]*memberInformer
	clients   *memberClients
	routes    []route // request paths to the informers they feed, for status
}

// memberClients are built on a config whose HTTP client resolves the member's credentials on
// every request (see rotatingTransport). Each kind of client is built on first use: a member whose
// caches are all typed holds no dynamic or metadata client, and a REST client only of the groups
// its typed caches are in.
type memberClients struct {
	*memberclients.Set
	config *rest.Config
	http   *http.Client

	mu    sync.Mutex
	typed map[schema.GroupVersion]rest.Interface
}

// typedFor is the member's REST client of a built-in group-version, built once.
func (cl *memberClients) typedFor(gv schema.GroupVersion) (rest.Interface, error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if rc, ok := cl.typed[gv]; ok {
		return rc, nil
	}
	rc, err := typedRESTClient(memberclients.Protobuf(cl.config), cl.http, gv)
	if err != nil {
		return nil, fmt.Errorf("building a client of %s: %w", gv, err)
	}
	if cl.typed == nil {
		cl.typed = map[schema.GroupVersion]rest.Interface{}
	}
	cl.typed[gv] = rc
	return rc, nil
}

func newMemberCaches(parent context.Context, m *multicluster.Member) *memberCaches {
	ctx, cancel := context.WithCancel(parent)
	return &memberCaches{member: m, ctx: ctx, cancel: cancel, informers: map[kindID]*memberInformer{}}
}

func (mc *memberCaches) stop() {
	mc.cancel()
	mc.done.Wait()
}

// clientsBackoff paces attempts to resolve a member whose credentials cannot be had yet.
var clientsBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 30 * time.Second}

// clientsFor returns the member's clients, resolving it until that works or the member's caches
// stop; each failure is reported to the informer that waits.
func (mc *memberCaches) clientsFor(st *memberInformer) (*memberClients, error) {
	backoff := clientsBackoff
	for {
		mc.mu.Lock()
		cl := mc.clients
		mc.mu.Unlock()
		if cl != nil {
			return cl, nil
		}
		cl, err := mc.buildClients()
		if err == nil {
			mc.mu.Lock()
			if mc.clients == nil {
				mc.clients = cl
			}
			cl = mc.clients
			mc.mu.Unlock()
			return cl, nil
		}
		st.fail(err)
		select {
		case <-mc.ctx.Done():
			return nil, mc.ctx.Err()
		case <-time.After(backoff.Step()):
		}
	}
}

func (mc *memberCaches) buildClients() (*memberClients, error) {
	a, err := mc.member.Access(mc.ctx)
	if err != nil {
		return nil, err
	}
	// The host, paths and content types are the resolved config's; the credentials, CA and pinning
	// come with each request from the member's current resolution.
	httpClient := &http.Client{Transport: &rotatingTransport{mc: mc, next: mc.member.Transport()}}
	config := rest.CopyConfig(a.Config)
	return &memberClients{Set: memberclients.New(config, httpClient, nil), config: config, http: httpClient}, nil
}

// informer is the member's informer state of kind k, or nil.
func (mc *memberCaches) informer(k kindID) *memberInformer {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.informers[k]
}
