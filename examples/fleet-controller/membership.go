package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcmulticluster "sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/multicluster"
)

// The objects the controller keeps on every member: kube-public is readable by everyone who can
// reach the member, as the registry entry it describes is meant to be.
//
// A member may be in several cluster sets at once (joined into each), so each set keeps an
// object of its own, cluster-registry-membership-SET: one object written by two sets' entries
// would flip between them for ever.
const (
	membershipNamespace = "kube-public"
	membershipPrefix    = "cluster-registry-membership-"
	fieldManager        = "fleet-controller"
	// clusterSetLabel is on every membership object, so that a reader lists them all with
	// kubectl get configmap -n kube-public -l clusterregistry.k8s.io/cluster-set.
	clusterSetLabel = "clusterregistry.k8s.io/cluster-set"
)

// membershipName is the name of the object that cluster set keeps on its members.
func membershipName(set string) string { return membershipPrefix + set }

// How often one object may be rewritten before the controller stops feeding a fight over it: a
// member's object changes when its display name does, a few times a day at most; anything near
// limit writes in window is a second writer.
const (
	churnLimit  = 10
	churnWindow = 30 * time.Second
	churnHold   = time.Minute
)

// membership reconciles the membership ConfigMap on the member a request names.
type membership struct {
	mgr   mcmanager.Manager
	fleet *multicluster.Fleet
	log   logr.Logger
	churn *churn
}

// setUpMembership adds the controller: each member's membership ConfigMap is reconciled when the
// member is engaged (its kube-public namespace is seen) and whenever the ConfigMap changes.
func setUpMembership(mgr mcmanager.Manager, fleet *multicluster.Fleet, log logr.Logger) error {
	isMembership := func(o client.Object) bool {
		return o.GetNamespace() == membershipNamespace && strings.HasPrefix(o.GetName(), membershipPrefix)
	}
	toMembership := func(context.Context, client.Object) []reconcile.Request {
		// The name is the cluster set's, which the request's cluster names: see Reconcile.
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: membershipNamespace}}}
	}
	return mcbuilder.ControllerManagedBy(mgr).
		Named("cluster-registry-membership").
		// multicluster-runtime's builder does not pass this one of the manager's options on.
		WithOptions(mccontroller.Options{SkipNameValidation: mgr.GetControllerOptions().SkipNameValidation}).
		For(&corev1.ConfigMap{}, mcbuilder.WithPredicates(predicate.NewPredicateFuncs(isMembership))).
		Watches(&corev1.Namespace{}, mchandler.EnqueueRequestsFromMapFunc(toMembership),
			mcbuilder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == membershipNamespace }))).
		Complete(&membership{mgr: mgr, fleet: fleet, log: log, churn: newChurn(churnLimit, churnWindow, churnHold)})
}

func (r *membership) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	key, ok := mcprovider.MemberKey(req.ClusterName)
	if !ok {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("cluster %q is not a registry member", req.ClusterName))
	}
	name := membershipName(key.Namespace)
	if req.Name != "" && req.Name != name {
		return ctrl.Result{}, nil // another cluster set's object on a member both sets share
	}
	churnKey := string(req.ClusterName) + "/" + name
	m := r.fleet.Member(key.Namespace, key.Name)
	cl, err := r.mgr.GetCluster(ctx, req.ClusterName)
	if m == nil || errors.Is(err, mcmulticluster.ErrClusterNotFound) {
		r.churn.forget(churnKey)
		return ctrl.Result{}, nil // the member left
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if until, held := r.churn.held(churnKey); held {
		return ctrl.Result{RequeueAfter: time.Until(until)}, nil
	}
	want := map[string]string{
		"clusterSet":  key.Namespace,
		"name":        key.Name,
		"displayName": m.Cluster().Spec.DisplayName,
	}
	// Read from the member's cache first: an object that already says what it should is not
	// written, so a controller over a large fleet writes only what changed.
	var current corev1.ConfigMap
	err = cl.GetClient().Get(ctx, client.ObjectKey{Namespace: membershipNamespace, Name: name}, &current)
	switch {
	case err == nil && maps.Equal(current.Data, want) && current.Labels[clusterSetLabel] == key.Namespace:
		return ctrl.Result{}, nil
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("member %s: reading %s/%s: %w", key, membershipNamespace, name, err)
	}
	cm := corev1ac.ConfigMap(name, membershipNamespace).
		WithLabels(map[string]string{clusterSetLabel: key.Namespace}).
		WithData(want)
	err = cl.GetClient().Apply(ctx, cm, client.FieldOwner(fieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil // no kube-public on this member: nothing to keep
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("member %s: applying %s/%s: %w", key, membershipNamespace, name, err)
	}
	if cm.ResourceVersion == nil || *cm.ResourceVersion == current.ResourceVersion {
		return ctrl.Result{}, nil // the cache was behind; the object already said this
	}
	if n, hold := r.churn.wrote(churnKey); hold {
		r.log.Error(errFighting, "another writer keeps changing a membership object back; holding writes to it",
			"member", key.String(), "object", membershipNamespace+"/"+name, "rewrites", n, "within", churnWindow,
			"holdFor", churnHold, "itLastSaid", current.Data["clusterSet"]+"/"+current.Data["name"],
			"hint", "is this member in the registry twice, under two names of one cluster set? Unjoin one of them")
		return ctrl.Result{RequeueAfter: churnHold}, nil
	}
	return ctrl.Result{}, nil
}

// errFighting is what the controller logs when it stops feeding a fight over an object.
var errFighting = errors.New("membership object rewritten too often")
