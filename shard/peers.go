package shard

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"
)

// GroupLabel is on every peer Lease, naming the group of replicas it belongs to.
const GroupLabel = "clusterregistry.k8s.io/shard-group"

// weightAnnotation holds a peer's Weight on its Lease.
const weightAnnotation = "clusterregistry.k8s.io/shard-weight"

// PeerOptions configure a replica's membership of a group.
type PeerOptions struct {
	// Namespace of the peer Leases in the registry. Required.
	Namespace string
	// Group names the replicas that divide the members among themselves: one per controller
	// Deployment. Required.
	Group string
	// Identity of this replica, unique in the group; default the host name (a pod's name) and a
	// random suffix.
	Identity string
	// Weight is this replica's share relative to the others'; 0 counts as 1.
	Weight float64
	// LeaseDuration is how long a replica that stops renewing counts as live: how long the
	// members of one that crashed wait for another. Default 10s. A replica that stops gracefully
	// deletes its Lease, and its members move at once.
	LeaseDuration time.Duration
	// RenewPeriod is how often each replica renews its Lease and looks at the others'. Default 2s.
	RenewPeriod time.Duration
	// CollectAfter is how long a peer's Lease must have gone unrenewed before a live replica
	// deletes it: a replica that crashed (OOM-killed, SIGKILL) cannot delete its own, and its
	// Lease would stay in the registry for good. Default 6 × LeaseDuration (a minute with the
	// defaults). See Peers for why a Lease that is still being renewed is never deleted.
	CollectAfter time.Duration
	// Logger says which Leases this replica collected; default none.
	Logger logr.Logger
}

func (o PeerOptions) defaulted() (PeerOptions, error) {
	if o.Namespace == "" || o.Group == "" {
		return o, errors.New("shard: PeerOptions.Namespace and Group are required")
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = host + "-" + strings.ToLower(rand.Text()[:6])
	}
	o.LeaseDuration = cmp.Or(o.LeaseDuration, 10*time.Second)
	o.RenewPeriod = cmp.Or(o.RenewPeriod, 2*time.Second)
	if o.RenewPeriod >= o.LeaseDuration {
		return o, fmt.Errorf("shard: PeerOptions.RenewPeriod (%s) must be shorter than LeaseDuration (%s)", o.RenewPeriod, o.LeaseDuration)
	}
	o.CollectAfter = cmp.Or(o.CollectAfter, 6*o.LeaseDuration)
	if o.CollectAfter < o.LeaseDuration {
		return o, fmt.Errorf("shard: PeerOptions.CollectAfter (%s) must not be shorter than LeaseDuration (%s)", o.CollectAfter, o.LeaseDuration)
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o, nil
}

// Peers keeps this replica's Lease in the group and follows the others': which replicas are live.
// One Lease per replica, renewed every RenewPeriod: a group's writes to the registry are its
// replicas over RenewPeriod, whatever the size of the fleet.
//
// A replica that stops deletes its own Lease; one that crashed cannot, so every live replica
// collects the Leases of the group that have stayed unchanged, and expired, for CollectAfter.
// "Unchanged" is judged by the Lease's resourceVersion as this replica saw it, on its own clock:
// a replica whose clock lags renews a Lease whose renewTime looks old, but each renewal changes
// its resourceVersion, so such a Lease is never collected. The delete is conditional on that
// resourceVersion, so a renewal between the look and the delete wins.
type Peers struct {
	opts   PeerOptions
	leases coordinationclient.LeaseInterface

	mu       sync.Mutex
	live     []Peer
	watchers []chan struct{}
	// unchanged is, for each Lease of the group not renewed within its duration, the
	// resourceVersion this replica saw and since when (its own clock). Only Run's loop uses it.
	unchanged map[string]seenVersion
}

// seenVersion is a Lease's resourceVersion as first seen, and when.
type seenVersion struct {
	resourceVersion string
	since           time.Time
}

// NewPeers returns this replica's membership of its group; Run joins it.
func NewPeers(leases coordinationclient.LeasesGetter, opts PeerOptions) (*Peers, error) {
	o, err := opts.defaulted()
	if err != nil {
		return nil, err
	}
	return &Peers{opts: o, leases: leases.Leases(o.Namespace)}, nil
}

// Self is this replica.
func (p *Peers) Self() Peer { return Peer{ID: p.opts.Identity, Weight: p.opts.Weight} }

// Live is the group's live replicas as last seen, this one included once it has joined, by ID.
func (p *Peers) Live() []Peer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.live)
}

// changed returns a channel that receives when Live changes.
func (p *Peers) changed() <-chan struct{} {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.watchers = append(p.watchers, ch)
	p.mu.Unlock()
	return ch
}

// Run renews this replica's Lease and follows the others' until ctx ends, then deletes its Lease,
// so that the others take its members at once rather than when it would have expired.
func (p *Peers) Run(ctx context.Context) error {
	name := leaseName(p.opts.Group, p.opts.Identity)
	defer func() {
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = p.leases.Delete(stop, name, metav1.DeleteOptions{})
	}()
	ticker := time.NewTicker(p.opts.RenewPeriod)
	defer ticker.Stop()
	for {
		if err := p.renew(ctx, name); err != nil && ctx.Err() == nil {
			return err
		}
		if err := p.look(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// leaseName is a replica's Lease: the group's and the replica's names, made a valid object name
// (lowercase letters, digits, '-' and '.'; at most 253 characters). A host name may hold capitals
// or underscores, and two such names may differ only in them, so a name that had to change, or be
// cut, ends with a digest of the identity, which keeps it unique.
func leaseName(group, identity string) string {
	raw := group + "-" + identity
	var b strings.Builder
	for _, r := range strings.ToLower(raw) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-.")
	if name == raw && len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(identity))
	suffix := "-" + hex.EncodeToString(sum[:4])
	if len(name) > 253-len(suffix) {
		name = strings.TrimRight(name[:253-len(suffix)], "-.")
	}
	return name + suffix
}

// renew writes this replica's Lease: created the first time, its renew time moved on after.
func (p *Peers) renew(ctx context.Context, name string) error {
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.opts.Namespace,
			Labels:      map[string]string{GroupLabel: p.opts.Group},
			Annotations: map[string]string{weightAnnotation: strconv.FormatFloat(p.opts.Weight, 'g', -1, 64)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(p.opts.Identity), RenewTime: &now, AcquireTime: &now,
			LeaseDurationSeconds: ptr.To(int32(p.opts.LeaseDuration / time.Second))},
	}
	current, err := p.leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = p.leases.Create(ctx, lease, metav1.CreateOptions{})
		return wrap("creating its Lease", err)
	}
	if err != nil {
		return wrap("reading its Lease", err)
	}
	current.Spec.RenewTime, current.Spec.HolderIdentity, current.Spec.LeaseDurationSeconds = &now, lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds
	_, err = p.leases.Update(ctx, current, metav1.UpdateOptions{})
	return wrap("renewing its Lease", err)
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("shard: %s: %w", what, err)
}

// look lists the group's Leases and keeps those renewed within their duration.
func (p *Peers) look(ctx context.Context) error {
	list, err := p.leases.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{GroupLabel: p.opts.Group}).String()})
	if err != nil {
		return wrap("listing the group's Leases", err)
	}
	now := time.Now()
	var live []Peer
	var expired []coordinationv1.Lease
	for _, l := range list.Items {
		if l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil || l.DeletionTimestamp != nil {
			continue
		}
		if now.Sub(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
			expired = append(expired, l)
			continue // a replica that stopped renewing: crashed, or cut off
		}
		weight, _ := strconv.ParseFloat(l.Annotations[weightAnnotation], 64)
		live = append(live, Peer{ID: *l.Spec.HolderIdentity, Weight: weight})
	}
	slices.SortFunc(live, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	p.collect(ctx, expired, now)
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Equal(live, p.live) {
		return nil
	}
	p.live = live
	for _, ch := range p.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

// collect deletes the expired Leases that this replica has seen unchanged for CollectAfter, each
// only at the resourceVersion it saw. Leases that are live again, or gone, are forgotten. A
// failed delete is tried again at the next look; it never fails the replica.
func (p *Peers) collect(ctx context.Context, expired []coordinationv1.Lease, now time.Time) {
	seen := make(map[string]seenVersion, len(expired))
	for _, l := range expired {
		if l.Name == leaseName(p.opts.Group, p.opts.Identity) {
			continue // this replica's own, not renewed in time: Run renews it
		}
		v, ok := p.unchanged[l.Name]
		if !ok || v.resourceVersion != l.ResourceVersion {
			v = seenVersion{resourceVersion: l.ResourceVersion, since: now}
		}
		if now.Sub(v.since) < p.opts.CollectAfter {
			seen[l.Name] = v
			continue
		}
		err := p.leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
		switch {
		case err == nil:
			p.opts.Logger.Info("collected the Lease of a replica that stopped renewing it", "lease", l.Name,
				"replica", ptr.Deref(l.Spec.HolderIdentity, ""), "renewTime", l.Spec.RenewTime.Time, "unchangedFor", now.Sub(v.since).Round(time.Second))
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Deleted by another replica, or renewed since this replica looked.
		default:
			seen[l.Name] = v
			p.opts.Logger.Error(err, "collecting an expired Lease; trying again at the next look", "lease", l.Name)
		}
	}
	p.unchanged = seen
}
