package main

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcmulticluster "sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/multicluster"
)

// The object the controller keeps on every member: kube-public is readable by everyone who can
// reach the member, as the registry entry it describes is meant to be.
const (
	membershipNamespace = "kube-public"
	membershipName      = "cluster-registry-membership"
	fieldManager        = "fleet-controller"
)

// membership reconciles the membership ConfigMap on the member a request names.
type membership struct {
	mgr   mcmanager.Manager
	fleet *multicluster.Fleet
}

// setUpMembership adds the controller: each member's membership ConfigMap is reconciled when the
// member is engaged (its kube-public namespace is seen) and whenever the ConfigMap changes.
func setUpMembership(mgr mcmanager.Manager, fleet *multicluster.Fleet) error {
	isMembership := func(o client.Object) bool {
		return o.GetNamespace() == membershipNamespace && o.GetName() == membershipName
	}
	toMembership := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: membershipNamespace, Name: membershipName}}}
	}
	return mcbuilder.ControllerManagedBy(mgr).
		Named("cluster-registry-membership").
		For(&corev1.ConfigMap{}, mcbuilder.WithPredicates(predicate.NewPredicateFuncs(isMembership))).
		Watches(&corev1.Namespace{}, mchandler.EnqueueRequestsFromMapFunc(toMembership),
			mcbuilder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == membershipNamespace }))).
		Complete(&membership{mgr: mgr, fleet: fleet})
}

func (r *membership) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	key, ok := mcprovider.MemberKey(req.ClusterName)
	if !ok {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("cluster %q is not a registry member", req.ClusterName))
	}
	m := r.fleet.Member(key.Namespace, key.Name)
	cl, err := r.mgr.GetCluster(ctx, req.ClusterName)
	if m == nil || errors.Is(err, mcmulticluster.ErrClusterNotFound) {
		return ctrl.Result{}, nil // the member left
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	cm := corev1ac.ConfigMap(membershipName, membershipNamespace).WithData(map[string]string{
		"clusterSet":  key.Namespace,
		"name":        key.Name,
		"displayName": m.Cluster().Spec.DisplayName,
	})
	err = cl.GetClient().Apply(ctx, cm, client.FieldOwner(fieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil // no kube-public on this member: nothing to keep
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("member %s: applying %s/%s: %w", key, membershipNamespace, membershipName, err)
	}
	return ctrl.Result{}, nil
}
