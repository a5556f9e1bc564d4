package scheduler_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// A Placement's decision is written, owned by it, and its status says what was decided and why;
// a changed spec is decided again; a policy that cannot be used is Misconfigured and its decision
// kept as it was; a deleted Placement's decision goes; a Placement another replica owns is left
// alone, and taken up, from its written decision, once owned.
func TestControllerOfPlacements(t *testing.T) {
	realservers.Required(t)
	defer goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...)
	ctx := t.Context()
	ns := fleettest.NewSet(t, lf)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	clusters := registry.ClusterregistryV1alpha1().Clusters(ns)
	placements := registry.ClusterregistryV1alpha1().Placements(ns)
	for _, m := range []struct{ name, env string }{{"prod-1", "prod"}, {"prod-2", "prod"}, {"prod-3", "prod"}, {"dev-1", "dev"}} {
		addReadyCluster(t, clusters, m.name, m.env)
	}

	fleet := multicluster.NewFleet(registry, nil, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	defer fleet.Stop()
	decisions := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	var ownsBatch atomic.Bool // whether this replica owns the "batch" Placement
	ctrl, err := scheduler.NewController(fleet, registry, decisions, scheduler.ControllerOptions{
		Options:   scheduler.Options{SchedulerName: "clusterregistry", Fresh: func() bool { return fleet.Status().Fresh() }},
		Namespace: ns, OwnsInterval: 100 * time.Millisecond,
		Owns: func(key types.NamespacedName) bool { return key.Name != "batch" || ownsBatch.Load() },
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(runCtx) }()
	defer func() { stop(); require.NoError(t, <-done) }()

	chosen := func(name string) []string {
		return chosenSorted(t, decisions, types.NamespacedName{Namespace: ns, Name: name})
	}
	waitStatus := func(name string, cond func(*v1alpha1.Placement) bool, what string) *v1alpha1.Placement {
		t.Helper()
		return waitPlacementStatus(t, placements, name, cond, what)
	}
	condition := placementCondition
	update := func(name string, change func(*v1alpha1.PlacementSpec)) int64 {
		t.Helper()
		return updatePlacement(t, placements, name, change)
	}
	s := &placementsController{ctx: ctx, ns: ns, clusters: clusters, placements: placements, decisions: decisions, ownsBatch: &ownsBatch, chosen: chosen, waitStatus: waitStatus, condition: condition, update: update}
	s.decided(t)
	s.moreThanThereAre(t)
	s.misconfigured(t)
	s.fixed(t)
	s.anotherReplicas(t)
	s.givenUp(t)
	s.anotherScheduler(t)
	s.deletedWhileMisconfigured(t)
}

// placementsController is what the parts of TestControllerOfPlacements share, in order: each starts
// where the one before it left the Placements.
type placementsController struct {
	ctx        context.Context
	ns         string
	clusters   crv1alpha1.ClusterInterface
	placements crv1alpha1.PlacementInterface
	decisions  *cpversioned.Clientset
	ownsBatch  *atomic.Bool
	chosen     func(name string) []string
	waitStatus func(name string, cond func(*v1alpha1.Placement) bool, what string) *v1alpha1.Placement
	condition  func(p *v1alpha1.Placement, typ string) metav1.Condition
	update     func(name string, change func(*v1alpha1.PlacementSpec)) int64
}

// decided: a Placement is decided: its status counts the candidates' reasons, its slices are its
// own; decided again with nothing to change, its status is not written again.
func (s *placementsController) decided(t *testing.T) {
	ctx, ns, placements, decisions, chosen, waitStatus, condition := s.ctx, s.ns, s.placements, s.decisions, s.chosen, s.waitStatus, s.condition
	web, err := placements.Create(ctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.PlacementSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, Count: ptr.To[int32](2)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p := waitStatus("web", func(p *v1alpha1.Placement) bool { return p.Status.ObservedGeneration == 1 }, "decided")
	require.Equal(t, int32(2), p.Status.Chosen)
	require.Equal(t, "web", p.Status.DecisionKey)
	require.Equal(t, []v1alpha1.PlacementReasonCount{{Reason: "Chosen", Count: 2}, {Reason: "OverCount", Count: 1}, {Reason: "Selector", Count: 1}}, p.Status.Candidates)
	require.Equal(t, metav1.ConditionTrue, condition(p, v1alpha1.PlacementSatisfied).Status)
	require.Equal(t, metav1.ConditionFalse, condition(p, v1alpha1.PlacementMisconfigured).Status)
	require.Len(t, chosen("web"), 2)
	slices0, err := decisions.ApisV1alpha1().PlacementDecisions(ns).Get(ctx, "web-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, slices0.OwnerReferences, 1)
	require.Equal(t, web.UID, slices0.OwnerReferences[0].UID, "the slices are the Placement's, for the garbage collector")

	// Decided again, nothing to change: the status is not written again.
	settled := p.ResourceVersion
	time.Sleep(500 * time.Millisecond)
	again, err := placements.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, settled, again.ResourceVersion, "the status was rewritten with nothing changed")
}

// moreThanThereAre: a count above the members there are: every one chosen, not Satisfied, saying
// why.
func (s *placementsController) moreThanThereAre(t *testing.T) {
	chosen, waitStatus, condition, update := s.chosen, s.waitStatus, s.condition, s.update
	// More than there are: every production member, not Satisfied, and the message says why.
	gen := update("web", func(s *v1alpha1.PlacementSpec) { s.Count = ptr.To[int32](5) })
	p := waitStatus("web", func(p *v1alpha1.Placement) bool { return p.Status.ObservedGeneration == gen }, "decided again")
	require.Equal(t, int32(3), p.Status.Chosen)
	sat := condition(p, v1alpha1.PlacementSatisfied)
	require.Equal(t, metav1.ConditionFalse, sat.Status)
	require.Equal(t, v1alpha1.ReasonNotEnoughCandidates, sat.Reason)
	require.Contains(t, sat.Message, "3 of 5 chosen")
	require.Contains(t, sat.Message, "Selector 1")
	require.Equal(t, []string{"prod-1", "prod-2", "prod-3"}, chosen("web"))
}

// misconfigured: a CEL expression that does not compile: Misconfigured, the decision kept as it
// was.
func (s *placementsController) misconfigured(t *testing.T) {
	ctx, clusters, chosen, waitStatus, condition, update := s.ctx, s.clusters, s.chosen, s.waitStatus, s.condition, s.update
	// A CEL expression that does not compile (the server cannot tell): Misconfigured, the
	// decision kept as it was, even as a chosen member leaves.
	gen := update("web", func(s *v1alpha1.PlacementSpec) { s.CEL = `cluster.labels[` })
	p := waitStatus("web", func(p *v1alpha1.Placement) bool { return p.Status.ObservedGeneration == gen }, "misconfigured")
	mis := condition(p, v1alpha1.PlacementMisconfigured)
	require.Equal(t, metav1.ConditionTrue, mis.Status)
	require.Equal(t, v1alpha1.ReasonInvalidPolicy, mis.Reason)
	require.Contains(t, mis.Message, "cel:")
	require.Contains(t, mis.Message, "the decision last written is kept")
	require.NoError(t, clusters.Delete(ctx, "prod-3", metav1.DeleteOptions{}))
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, []string{"prod-1", "prod-2", "prod-3"}, chosen("web"), "a misconfigured Placement's decision changed")
}

// fixed: fixed: decided again, from the registry as it is now.
func (s *placementsController) fixed(t *testing.T) {
	chosen, waitStatus, condition, update := s.chosen, s.waitStatus, s.condition, s.update
	// Fixed: decided again, from the registry as it is now.
	gen := update("web", func(s *v1alpha1.PlacementSpec) { s.CEL = `cluster.name != "prod-1"` })
	p := waitStatus("web", func(p *v1alpha1.Placement) bool {
		return p.Status.ObservedGeneration == gen && condition(p, v1alpha1.PlacementMisconfigured).Status == metav1.ConditionFalse
	}, "fixed")
	require.Equal(t, []string{"prod-2"}, chosen("web"))
	require.Equal(t, int32(1), p.Status.Chosen)
}

// anotherReplicas: another replica's Placement is neither decided nor given a status here, until
// owned.
func (s *placementsController) anotherReplicas(t *testing.T) {
	ctx, placements, ownsBatch, chosen, waitStatus := s.ctx, s.placements, s.ownsBatch, s.chosen, s.waitStatus
	// Another replica's Placement: neither decided nor given a status here. Once owned, it is.
	_, err := placements.Create(ctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "batch"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond)
	require.Nil(t, chosen("batch"), "decided a Placement this replica does not own")
	p, err := placements.Get(ctx, "batch", metav1.GetOptions{})
	require.NoError(t, err)
	require.Zero(t, p.Status.ObservedGeneration)
	ownsBatch.Store(true)
	waitStatus("batch", func(p *v1alpha1.Placement) bool { return p.Status.ObservedGeneration == 1 }, "taken up once owned")
	require.Equal(t, []string{"dev-1", "prod-1", "prod-2"}, chosen("batch"))
}

// givenUp: given up: its decision stays, for the replica that owns it now.
func (s *placementsController) givenUp(t *testing.T) {
	ownsBatch, chosen := s.ownsBatch, s.chosen
	// Given up: its decision stays, for the replica that owns it now.
	ownsBatch.Store(false)
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, []string{"dev-1", "prod-1", "prod-2"}, chosen("batch"))
}

// anotherScheduler: another scheduler's decision of the same key is not overwritten, and the status
// says why.
func (s *placementsController) anotherScheduler(t *testing.T) {
	ctx, ns, placements, decisions, waitStatus, condition := s.ctx, s.ns, s.placements, s.decisions, s.waitStatus, s.condition
	// Another scheduler's decision of the same key: not overwritten, and the status says why.
	_, err := decisions.ApisV1alpha1().PlacementDecisions(ns).Create(ctx, &cpv1alpha1.PlacementDecision{
		ObjectMeta:    metav1.ObjectMeta{Name: "taken-0", Labels: map[string]string{cpv1alpha1.DecisionKeyLabel: "taken"}},
		SchedulerName: "someone-else", Decisions: []cpv1alpha1.ClusterDecision{}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = placements.Create(ctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "taken"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p := waitStatus("taken", func(p *v1alpha1.Placement) bool {
		return condition(p, v1alpha1.PlacementSatisfied).Reason == v1alpha1.ReasonDecisionNotWritten
	}, "the foreign decision reported")
	require.Contains(t, condition(p, v1alpha1.PlacementSatisfied).Message, `belongs to scheduler "someone-else"`)
	foreign, err := decisions.ApisV1alpha1().PlacementDecisions(ns).Get(ctx, "taken-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "someone-else", foreign.SchedulerName)
	require.Empty(t, foreign.Decisions, "another scheduler's decision was overwritten")
}

// deletedWhileMisconfigured: deleted while Misconfigured, its decision goes.
func (s *placementsController) deletedWhileMisconfigured(t *testing.T) {
	ctx, ns, placements, decisions, chosen, waitStatus, condition, update := s.ctx, s.ns, s.placements, s.decisions, s.chosen, s.waitStatus, s.condition, s.update
	// Deleted while Misconfigured (its decision frozen): its decision goes (here, with no
	// garbage collector, by the controller).
	gen := update("web", func(s *v1alpha1.PlacementSpec) { s.CEL = `cluster.labels[` })
	waitStatus("web", func(p *v1alpha1.Placement) bool {
		return p.Status.ObservedGeneration == gen && condition(p, v1alpha1.PlacementMisconfigured).Status == metav1.ConditionTrue
	}, "misconfigured again")
	require.Equal(t, []string{"prod-2"}, chosen("web"))
	require.NoError(t, placements.Delete(ctx, "web", metav1.DeleteOptions{}))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := decision.Read(ctx, decisions, ns, "web")
		if errors.Is(err, decision.ErrNoDecision) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the deleted Placement's decision is still there: %v", err)
	}
	_, err := decisions.ApisV1alpha1().PlacementDecisions(ns).Get(ctx, "web-0", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
}

// chosenSorted is the names of the members key's decision chose, sorted; nil without one.
func chosenSorted(t *testing.T, decisions cpversioned.Interface, key types.NamespacedName) []string {
	d, err := decision.Read(t.Context(), decisions, key.Namespace, key.Name)
	if err != nil {
		return nil
	}
	var names []string
	for _, c := range d.Clusters {
		names = append(names, c.Name)
	}
	return slices.Sorted(slices.Values(names))
}

// waitPlacementStatus waits, 30 s at most, until Placement name satisfies cond, and returns it.
func waitPlacementStatus(t *testing.T, placements crv1alpha1.PlacementInterface, name string, cond func(*v1alpha1.Placement) bool, what string) *v1alpha1.Placement {
	t.Helper()
	var p *v1alpha1.Placement
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		p, err = placements.Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		if cond(p) {
			return p
		}
		require.True(t, time.Now().Before(deadline), "%s: %s; status %+v", name, what, p.Status)
	}
}

// placementCondition is p's condition of type typ, or a zero one.
func placementCondition(p *v1alpha1.Placement, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(p.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// updatePlacement changes Placement name's spec, and returns its new generation.
func updatePlacement(t *testing.T, placements crv1alpha1.PlacementInterface, name string, change func(*v1alpha1.PlacementSpec)) int64 {
	t.Helper()
	p, err := placements.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	change(&p.Spec)
	p, err = placements.Update(t.Context(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	return p.Generation
}

// The controller refuses a registry without Placements or PlacementDecisions, saying what to
// install.
func TestServed(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	err := scheduler.Served(d)
	require.ErrorContains(t, err, "placements (clusterregistry.k8s.io/v1alpha1) are not served; install the registry's CRDs with `clusterregistry install`")
	d.Resources = []*metav1.APIResourceList{{GroupVersion: v1alpha1.SchemeGroupVersion.String(), APIResources: []metav1.APIResource{{Name: "clusters"}, {Name: "placements"}}}}
	err = scheduler.Served(d)
	require.ErrorContains(t, err, "placementdecisions (multicluster.x-k8s.io/v1alpha1) are not served; kubectl apply -f "+scheduler.PlacementDecisionCRDManifest)
	d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: cpv1alpha1.GroupVersion.String(), APIResources: []metav1.APIResource{{Name: "placementdecisions"}}})
	require.NoError(t, scheduler.Served(d))
}

// deploy/controllers/placements-clusterrole.yaml is all the Controller needs beside reading
// Clusters: run as a service account bound to exactly it, it reads a Placement, writes its
// decision and its status, and deletes the decision with the Placement.
func TestControllerRunsWithTheShippedClusterRole(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	ns := fleettest.NewSet(t, lf)
	admin := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	data, err := os.ReadFile("../deploy/controllers/placements-clusterrole.yaml")
	require.NoError(t, err)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict(data, &role))
	role.Name = ns + "-placements" // one per test namespace, so that -count=N does not collide
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	_, err = admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scheduler"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scheduler"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scheduler"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "scheduler", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	sa := rest.AnonymousClientConfig(lf.Registry.Config)
	sa.BearerToken = tr.Status.Token

	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	c, err := registry.ClusterregistryV1alpha1().Clusters(ns).Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "prod-1"},
		Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://prod-1.example:6443"}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReachable, Message: "set by the test"})
	_, err = registry.ClusterregistryV1alpha1().Clusters(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The Fleet reads Clusters with what health's ClusterRole gives; the Controller is the service account.
	fleet := multicluster.NewFleet(registry, nil, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	defer fleet.Stop()
	decisions := cpversioned.NewForConfigOrDie(sa)
	ctrl, err := scheduler.NewController(fleet, versioned.NewForConfigOrDie(sa), decisions, scheduler.ControllerOptions{
		Options: scheduler.Options{SchedulerName: "clusterregistry"}, Namespace: ns})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(runCtx) }()
	defer func() { stop(); require.NoError(t, <-done) }()

	placements := registry.ClusterregistryV1alpha1().Placements(ns)
	_, err = placements.Create(ctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := placements.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.PlacementSatisfied) && p.Status.Chosen == 1
	}, 30*time.Second, 50*time.Millisecond, "no status written as the service account")
	d, err := decision.Read(ctx, decisions, ns, "web")
	require.NoError(t, err)
	require.Equal(t, []types.NamespacedName{{Namespace: ns, Name: "prod-1"}}, d.Clusters)
	require.NoError(t, placements.Delete(ctx, "web", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := decision.Read(ctx, decisions, ns, "web")
		return errors.Is(err, decision.ErrNoDecision)
	}, 30*time.Second, 50*time.Millisecond, "the decision was not deleted as the service account")
}
