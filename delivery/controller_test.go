package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// deliveryEnv is a cluster set of the local fleet's members with a releases Controller running on
// a Fleet of it.
type deliveryEnv struct {
	ns        string
	registry  versioned.Interface
	decisions cpversioned.Interface
	ctrl      *delivery.Controller
	members   map[string]kubernetes.Interface
	// stop stops the Controller and its Fleet, checking that nothing is left running; the test's
	// end stops them when the test did not.
	stop func()
}

func startDelivery(t *testing.T) *deliveryEnv {
	t.Helper()
	return startDeliveryIn(t, fleettest.CopySet(t, lf), nil)
}

// startDeliveryIn runs the Controller on cluster set ns as whoever config says (the registry's
// admin when nil), on a Fleet of ns and of the other cluster sets named.
func startDeliveryIn(t *testing.T, ns string, config *rest.Config, otherSets ...string) *deliveryEnv {
	t.Helper()
	return startDeliveryWith(t, ns, config, nil, otherSets...)
}

// startDeliveryWith is startDeliveryIn with options of the test's (set changes them). Its stop
// checks that nothing of the Controller is left running.
func startDeliveryWith(t *testing.T, ns string, config *rest.Config, set func(*delivery.ControllerOptions), otherSets ...string) *deliveryEnv {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	env := launchDelivery(t, ns, config, set, otherSets...)
	stop := env.stop
	env.stop = func() {
		stop()
		goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, fleetmain.IgnoreFleetProcesses, ignore)...)
	}
	return env
}

// launchDelivery runs a Controller as startDeliveryWith does, for a test that runs several at once
// and checks for leaks once all have stopped.
func launchDelivery(t *testing.T, ns string, config *rest.Config, set func(*delivery.ControllerOptions), otherSets ...string) *deliveryEnv {
	t.Helper()
	env := &deliveryEnv{ns: ns, registry: versioned.NewForConfigOrDie(lf.Registry.Config),
		decisions: cpversioned.NewForConfigOrDie(lf.Registry.Config), members: map[string]kubernetes.Interface{}}
	for _, m := range lf.Members {
		env.members[m.Name] = kubernetes.NewForConfigOrDie(m.Config)
	}
	if config == nil {
		config = lf.Registry.Config
	}
	kube := kubernetes.NewForConfigOrDie(config)
	registry := versioned.NewForConfigOrDie(config)
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kube)})
	require.NoError(t, err)
	fleet := multicluster.NewFleet(registry, resolver, multicluster.FleetOptions{Namespaces: append([]string{ns}, otherSets...)})
	opts := delivery.ControllerOptions{
		Namespace: ns, MemberTimeout: 10 * time.Second, RetryAfter: 2 * time.Second,
		Fresh: func() bool { return fleet.Status().Fresh() }}
	if set != nil {
		set(&opts)
	}
	ctrl, err := delivery.NewController(fleet, registry, kube, cpversioned.NewForConfigOrDie(config), opts)
	require.NoError(t, err)
	env.ctrl = ctrl
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, fleet.Start(ctx))
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	stopped := false
	env.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
		fleet.Stop()
	}
	t.Cleanup(func() { env.stop() })
	return env
}

func (e *deliveryEnv) decide(t *testing.T, members ...string) {
	t.Helper()
	var chosen []decision.Chosen
	for i, m := range members {
		chosen = append(chosen, decision.Chosen{Cluster: types.NamespacedName{Namespace: e.ns, Name: m}, Group: i})
	}
	_, err := decision.Write(t.Context(), e.decisions, e.ns, "web", chosen, decision.WriteOptions{SchedulerName: "test"})
	require.NoError(t, err)
}

func manifests(t *testing.T, objs ...runtime.Object) []runtime.RawExtension {
	var out []runtime.RawExtension
	for _, o := range objs {
		raw, err := json.Marshal(o)
		require.NoError(t, err)
		out = append(out, runtime.RawExtension{Raw: raw})
	}
	return out
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
}

// deployment is a Deployment of image, which the members' real controllers roll out (an image
// of localfleet.UnpullableRegistry never becomes Available: use badImage).
func deployment(name string, image ...string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	img := "registry.example/web:1"
	if len(image) > 0 {
		img = image[0]
	}
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: img}}}}}}
}

// badImage is an image whose Pods are scheduled and never run (ImagePullBackOff) on the members.
const badImage = localfleet.UnpullableRegistry + "/web:1"

// updateRelease changes the Release name of cluster set ns as change says, again on a conflict
// with the controller's status writes.
func (e *deliveryEnv) updateRelease(t *testing.T, ns, name string, change func(*v1alpha1.Release)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := e.registry.ClusterregistryV1alpha1().Releases(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(cur)
		_, err = e.registry.ClusterregistryV1alpha1().Releases(ns).Update(t.Context(), cur, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

// waitRelease waits until the Release's status satisfies ok, and returns it.
func (e *deliveryEnv) waitRelease(t *testing.T, name string, what string, ok func(*v1alpha1.Release) bool) *v1alpha1.Release {
	t.Helper()
	return e.waitReleaseWithin(t, name, what, 60*time.Second, ok)
}

// waitReleaseWithin is waitRelease for what takes longer than a minute (a member's Nodes judged
// NotReady by its node lifecycle controller).
func (e *deliveryEnv) waitReleaseWithin(t *testing.T, name string, what string, within time.Duration, ok func(*v1alpha1.Release) bool) *v1alpha1.Release {
	t.Helper()
	var rel *v1alpha1.Release
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		var err error
		rel, err = e.registry.ClusterregistryV1alpha1().Releases(e.ns).Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		if ok(rel) {
			return rel
		}
		if time.Now().After(deadline) {
			st, _ := json.MarshalIndent(rel.Status, "", "  ")
			t.Fatalf("release %s: %s: not within %s; status:\n%s", name, what, within, st)
		}
	}
}

func phase(rel *v1alpha1.Release, p v1alpha1.ReleaseMemberPhase) int32 {
	for _, c := range rel.Status.Phases {
		if c.Phase == p {
			return c.Count
		}
	}
	return 0
}

func condition(rel *v1alpha1.Release, t string) metav1.ConditionStatus {
	for _, c := range rel.Status.Conditions {
		if c.Type == t && c.ObservedGeneration == rel.Generation {
			return c.Status
		}
	}
	return ""
}

// A Release is delivered to the members of its decision, judged healthy from the members'
// watches (a Deployment is Ready only once its controller says so), kept there against edits by
// hand, quiet at steady state, pruned, removed from a member that leaves, and removed everywhere
// when deleted.
func TestReleaseLifecycle(t *testing.T) {
	parent := t
	env := startDelivery(t)
	appNS := "app-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	for _, kube := range env.members {
		_, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	env.decide(t, "member-1", "member-2")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, deployment("web", badImage), configMap("web-config", map[string]string{"color": "blue"}))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)

	// Applied everywhere, but not Ready while the Deployment's Pods do not run (a bad image).
	got := env.waitRelease(t, "web", "applied to both, progressing", func(r *v1alpha1.Release) bool {
		return r.Status.Members == 2 && phase(r, v1alpha1.PhaseProgressing) == 2
	})
	require.Equal(t, metav1.ConditionFalse, condition(got, v1alpha1.ReleaseAvailable))
	for name, kube := range env.members {
		cm, err := kube.CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
		require.NoError(t, err, name)
		require.Equal(t, "web", cm.Labels[v1alpha1.ReleaseLabel])
		require.Equal(t, env.ns, cm.Labels[v1alpha1.ReleaseNamespaceLabel])
		require.Equal(t, got.Status.Revision, cm.Labels[v1alpha1.RevisionLabel])
	}
	time.Sleep(2 * time.Second)
	got = env.waitRelease(t, "web", "still progressing", func(r *v1alpha1.Release) bool { return true })
	require.Zero(t, got.Status.Ready, "a member whose Pods never run was called Ready")

	// A good image: the members' Deployment controllers roll it out, and the Release is Available.
	env.updateRelease(t, env.ns, "web", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = manifests(t, deployment("web"), configMap("web-config", map[string]string{"color": "blue"}))
	})
	got = env.waitRelease(t, "web", "available", func(r *v1alpha1.Release) bool {
		return condition(r, v1alpha1.ReleaseAvailable) == metav1.ConditionTrue && r.Status.Ready == 2
	})
	revision := got.Status.Revision
	for name, kube := range env.members {
		d, err := kube.AppsV1().Deployments(appNS).Get(t.Context(), "web", metav1.GetOptions{})
		require.NoError(t, err, name)
		require.Equal(t, int32(1), d.Status.AvailableReplicas, "%s: Ready, as the Deployment controller says", name)
	}
	require.Empty(t, got.Status.Worst)
	slices, err := env.registry.ClusterregistryV1alpha1().ReleaseStatusSlices(env.ns).List(t.Context(), metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=web"})
	require.NoError(t, err)
	require.Len(t, slices.Items, 1)
	require.Len(t, slices.Items[0].Members, 2)
	require.Len(t, slices.Items[0].Members[0].Objects, 2)
	f := &releaseLifecycle{parent: parent, env: env, appNS: appNS, revision: revision}
	t.Run("steady state writes nothing", f.steadyStateWritesNothing)
	// A restart (a new version, a failover) is not a change: what the members were reported at
	// stays as it was, lastApplied included.
	t.Run("a restarted controller rewrites no status", f.aRestartedControllerRewritesNoStatus)
	t.Run("a member edited by hand is corrected from the watch", f.aMemberEditedByHandIsCorrectedFromTheWatch)
	t.Run("a new revision prunes what it no longer has", f.aNewRevisionPrunesWhatItNoLongerHas)
	// Each revision is recorded, with when its waves ran; undo puts one back, which rolls out
	// as the newest revision, as kubectl rollout undo does for a Deployment.
	t.Run("history and undo", f.historyAndUndo)
	// A restore from backup, or an exported manifest applied again: the object carries an older
	// revision's label and values. It is drift like any edit, corrected.
	t.Run("an older revision's copy put back is corrected", f.anOlderRevisionsCopyPutBackIsCorrected)
	t.Run("a member that leaves the decision has its objects removed", f.aMemberThatLeavesTheDecisionHasItsObjectsRemoved)
	t.Run("an empty decision removes nothing", f.anEmptyDecisionRemovesNothing)
	t.Run("deleting the Release removes its objects", f.deletingTheReleaseRemovesItsObjects)
}

// releaseLifecycle is what the subtests of TestReleaseLifecycle share.
type releaseLifecycle struct {
	parent   *testing.T
	env      *deliveryEnv
	appNS    string
	revision string
}

// steadyStateWritesNothing is the subtest "steady state writes nothing" of TestReleaseLifecycle.
func (f *releaseLifecycle) steadyStateWritesNothing(t *testing.T) {
	env := f.env
	before, events := env.ctrl.Writes(), env.releaseEvents(t, "web")
	time.Sleep(3 * time.Second)
	require.Equal(t, before, env.ctrl.Writes(), "writes at steady state")
	require.Equal(t, events, env.releaseEvents(t, "web"), "events at steady state")
	require.Len(t, events[delivery.EventRolloutComplete], 1, "%v", events)
}

// aRestartedControllerRewritesNoStatus is the subtest "a restarted controller rewrites no status" of TestReleaseLifecycle.
func (f *releaseLifecycle) aRestartedControllerRewritesNoStatus(t *testing.T) {
	parent, env := f.parent, f.env
	rels := env.registry.ClusterregistryV1alpha1().Releases(env.ns)
	slices := env.registry.ClusterregistryV1alpha1().ReleaseStatusSlices(env.ns)
	before, err := rels.Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	sl, err := slices.List(t.Context(), metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=web"})
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond)
	env.stop()
	// Watched from before the stop: whatever either controller writes from then on shows.
	w, err := rels.Watch(t.Context(), metav1.ListOptions{ResourceVersion: before.ResourceVersion, FieldSelector: "metadata.name=web"})
	require.NoError(t, err)
	defer w.Stop()
	ws, err := slices.Watch(t.Context(), metav1.ListOptions{ResourceVersion: sl.ResourceVersion, LabelSelector: v1alpha1.ReleaseLabel + "=web"})
	require.NoError(t, err)
	defer ws.Stop()
	*env = *startDeliveryIn(parent, env.ns, nil)
	// Its pass applies both objects on both members again (server-side apply of what is
	// there changes nothing on them); its status would be written right after.
	require.Eventually(t, func() bool { return env.ctrl.Writes() >= 4 }, 30*time.Second, 20*time.Millisecond,
		"the restarted controller did not reach the members")
	deadline := time.After(2 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			b, _ := json.MarshalIndent(ev.Object, "", " ")
			t.Errorf("Release written after the restart: %s %s", ev.Type, b)
		case ev := <-ws.ResultChan():
			b, _ := json.MarshalIndent(ev.Object, "", " ")
			t.Errorf("slice written after the restart: %s %s", ev.Type, b)
		case <-deadline:
			return
		}
	}
}

// aMemberEditedByHandIsCorrectedFromTheWatch is the subtest "a member edited by hand is corrected from the watch" of TestReleaseLifecycle.
func (f *releaseLifecycle) aMemberEditedByHandIsCorrectedFromTheWatch(t *testing.T) {
	env, appNS := f.env, f.appNS
	kube := env.members["member-1"]
	cm, err := kube.CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["color"] = "red"
	_, err = kube.CoreV1().ConfigMaps(appNS).Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	edited := time.Now()
	require.Eventually(t, func() bool {
		cm, err := kube.CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
		return err == nil && cm.Data["color"] == "blue"
	}, 10*time.Second, 50*time.Millisecond, "the edit was not corrected")
	t.Logf("drift corrected %s after the edit", time.Since(edited).Round(10*time.Millisecond))
	// And a deleted object is put back.
	require.NoError(t, kube.CoreV1().ConfigMaps(appNS).Delete(t.Context(), "web-config", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := kube.CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the deleted object was not put back")
}

// aNewRevisionPrunesWhatItNoLongerHas is the subtest "a new revision prunes what it no longer has" of TestReleaseLifecycle.
func (f *releaseLifecycle) aNewRevisionPrunesWhatItNoLongerHas(t *testing.T) {
	env, appNS, revision := f.env, f.appNS, f.revision
	env.updateRelease(t, env.ns, "web", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = manifests(t, configMap("web-config", map[string]string{"color": "green"}))
	})
	got := env.waitRelease(t, "web", "new revision ready", func(r *v1alpha1.Release) bool {
		return r.Status.Revision != revision && r.Status.Ready == 2
	})
	for name, kube := range env.members {
		cm, err := kube.CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
		require.NoError(t, err, name)
		require.Equal(t, "green", cm.Data["color"])
		require.Equal(t, got.Status.Revision, cm.Labels[v1alpha1.RevisionLabel])
		_, err = kube.AppsV1().Deployments(appNS).Get(t.Context(), "web", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%s: the Deployment the revision dropped is still there: %v", name, err)
	}
}

// historyAndUndo is the subtest "history and undo" of TestReleaseLifecycle.
func (f *releaseLifecycle) historyAndUndo(t *testing.T) {
	env, appNS, revision := f.env, f.appNS, f.revision
	rel, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	history, err := delivery.History(t.Context(), kubernetes.NewForConfigOrDie(lf.Registry.Config), rel)
	require.NoError(t, err)
	require.Len(t, history, 3, "%+v", history)
	for i, h := range history {
		require.Equal(t, int64(i+1), h.Number)
		require.Len(t, h.Waves, 1)
		// The first, a bad image, never became healthy: its wave never finished.
		require.Equal(t, i > 0, h.Waves[0].Finished != nil, "revision %d's wave: %+v", h.Number, h.Waves[0])
	}
	require.Equal(t, rel.Status.Revision, history[2].Hash)
	require.Equal(t, revision, history[1].Hash)
	require.Len(t, history[2].Record.Source.Manifests, 1)

	env.updateRelease(t, env.ns, "web", func(cur *v1alpha1.Release) { *cur = *delivery.Undo(cur, history[1]) })
	env.waitRelease(t, "web", "back at revision 2", func(r *v1alpha1.Release) bool {
		return r.Status.Revision == revision && r.Status.Ready == 2
	})
	require.Eventually(t, func() bool {
		history, err = delivery.History(t.Context(), kubernetes.NewForConfigOrDie(lf.Registry.Config), rel)
		return err == nil && len(history) == 3 && history[2].Hash == revision && history[2].Number == 4 && history[2].Waves[0].Finished != nil
	}, 10*time.Second, 100*time.Millisecond, "the undone revision is not the newest: %+v", history)
	require.Equal(t, "rollout undo to revision 2 ("+revision+")", history[2].ChangeCause)
	// A cause annotated after the revision was first seen (kubectl annotate after kubectl apply)
	// is recorded while the revision is current, as a Deployment's ReplicaSet takes it.
	earlier := history[1].ChangeCause
	env.updateRelease(t, env.ns, "web", func(cur *v1alpha1.Release) { cur.Annotations[delivery.ChangeCauseAnnotation] = "annotated afterwards" })
	require.Eventually(t, func() bool {
		history, err = delivery.History(t.Context(), kubernetes.NewForConfigOrDie(lf.Registry.Config), rel)
		return err == nil && len(history) == 3 && history[2].ChangeCause == "annotated afterwards"
	}, 10*time.Second, 100*time.Millisecond, "a cause annotated after the revision was seen is not recorded: %+v", history)
	require.Equal(t, earlier, history[1].ChangeCause, "an earlier revision's cause changed")
	cm, err := env.members["member-1"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "blue", cm.Data["color"])
	// Forward again, to the revision the next steps expect.
	env.updateRelease(t, env.ns, "web", func(cur *v1alpha1.Release) { *cur = *delivery.Undo(cur, history[1]) })
	env.waitRelease(t, "web", "forward again", func(r *v1alpha1.Release) bool { return r.Status.Revision == history[1].Hash && r.Status.Ready == 2 })
}

// anOlderRevisionsCopyPutBackIsCorrected is the subtest "an older revision's copy put back is corrected" of TestReleaseLifecycle.
func (f *releaseLifecycle) anOlderRevisionsCopyPutBackIsCorrected(t *testing.T) {
	env, appNS, revision := f.env, f.appNS, f.revision
	kube := env.members["member-1"]
	cm, err := kube.CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
	require.NoError(t, err)
	current := cm.Labels[v1alpha1.RevisionLabel]
	cm.Labels[v1alpha1.RevisionLabel], cm.Data["color"] = revision, "blue"
	_, err = kube.CoreV1().ConfigMaps(appNS).Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "velero-restore"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cm, err := kube.CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
		return err == nil && cm.Data["color"] == "green" && cm.Labels[v1alpha1.RevisionLabel] == current
	}, 10*time.Second, 50*time.Millisecond, "the older copy stood")
}

// aMemberThatLeavesTheDecisionHasItsObjectsRemoved is the subtest "a member that leaves the decision has its objects removed" of TestReleaseLifecycle.
func (f *releaseLifecycle) aMemberThatLeavesTheDecisionHasItsObjectsRemoved(t *testing.T) {
	env, appNS := f.env, f.appNS
	env.decide(t, "member-1")
	require.Eventually(t, func() bool {
		_, err := env.members["member-2"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 20*time.Second, 100*time.Millisecond, "member-2 kept the Release's objects")
	env.waitRelease(t, "web", "one member", func(r *v1alpha1.Release) bool { return r.Status.Members == 1 && r.Status.Ready == 1 })
}

// anEmptyDecisionRemovesNothing is the subtest "an empty decision removes nothing" of TestReleaseLifecycle.
func (f *releaseLifecycle) anEmptyDecisionRemovesNothing(t *testing.T) {
	env, appNS := f.env, f.appNS
	env.decide(t) // the placement lost every member
	got := env.waitRelease(t, "web", "stalled on the empty decision", func(r *v1alpha1.Release) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "EmptyDecision"
	})
	require.Contains(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseStalled).Message, "nothing is removed from the 1 members")
	time.Sleep(time.Second)
	_, err := env.members["member-1"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
	require.NoError(t, err, "an empty decision uninstalled the Release")
	env.decide(t, "member-1")
	env.waitRelease(t, "web", "back on member-1", func(r *v1alpha1.Release) bool {
		return r.Status.Ready == 1 && condition(r, v1alpha1.ReleaseStalled) == metav1.ConditionFalse
	})
}

// deletingTheReleaseRemovesItsObjects is the subtest "deleting the Release removes its objects" of TestReleaseLifecycle.
func (f *releaseLifecycle) deletingTheReleaseRemovesItsObjects(t *testing.T) {
	env, appNS := f.env, f.appNS
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "web", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Get(t.Context(), "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 20*time.Second, 100*time.Millisecond, "the Release was not finalized")
	_, err := env.members["member-1"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "member-1 kept the Release's objects: %v", err)
}

// An object already on a member that the Release was not given, with other values, is not taken
// over: the member is Failed with a Conflict naming the object, and the other member is Ready.
// A manifest the member refuses is named in status with the member's words.
func TestReleaseConflictsAndInvalidObjects(t *testing.T) {
	env := startDelivery(t)
	appNS := "app-conflicts"
	for _, kube := range env.members {
		_, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	theirs := configMap("shared", map[string]string{"owner": "someone else"})
	theirs.Namespace = appNS
	_, err := env.members["member-2"].CoreV1().ConfigMaps(appNS).Create(t.Context(), theirs, metav1.CreateOptions{FieldManager: "someone"})
	require.NoError(t, err)
	env.decide(t, "member-1", "member-2")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, configMap("shared", map[string]string{"owner": "the release"}))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
	}}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	got := env.waitRelease(t, "shared", "one ready, one conflict", func(r *v1alpha1.Release) bool {
		return r.Status.Ready == 1 && phase(r, v1alpha1.PhaseFailed) == 1
	})
	require.Len(t, got.Status.Worst, 1)
	require.Equal(t, "member-2", got.Status.Worst[0].Cluster)
	require.Equal(t, v1alpha1.FailureConflict, got.Status.Worst[0].Reason)
	require.Contains(t, got.Status.Worst[0].Message, "ConfigMap "+appNS+"/shared")
	require.Equal(t, metav1.ConditionTrue, condition(got, v1alpha1.ReleaseDegraded))
	cm, err := env.members["member-2"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "shared", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "someone else", cm.Data["owner"], "the other writer's object was taken over")

	// A kind the members do not serve, and a field of the wrong type.
	env.updateRelease(t, env.ns, "shared", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`)}}
	})
	got = env.waitRelease(t, "shared", "both failed, Invalid", func(r *v1alpha1.Release) bool { return phase(r, v1alpha1.PhaseFailed) == 2 })
	for _, w := range got.Status.Worst {
		require.Equal(t, v1alpha1.FailureInvalid, w.Reason, fmt.Sprint(w))
		require.Contains(t, w.Message, "does not serve example.com/v1, Kind=Widget")
	}
	// A field of the wrong type, and a namespace that does not exist: the member's own words.
	for _, c := range []struct{ manifest, want string }{
		{`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":"three"}}`, "Deployment.apps " + appNS + "/d: "},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"no-such-namespace"}}`, `namespaces "no-such-namespace" not found`},
	} {
		env.updateRelease(t, env.ns, "shared", func(cur *v1alpha1.Release) {
			cur.Spec.Source.Manifests = []runtime.RawExtension{{Raw: []byte(c.manifest)}}
		})
		got = env.waitRelease(t, "shared", c.want, func(r *v1alpha1.Release) bool {
			return phase(r, v1alpha1.PhaseFailed) == 2 && r.Status.ObservedGeneration == r.Generation && strings.Contains(r.Status.Worst[0].Message, c.want)
		})
		for _, w := range got.Status.Worst {
			require.Equal(t, v1alpha1.FailureInvalid, w.Reason, fmt.Sprint(w))
		}
	}
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "shared", metav1.DeleteOptions{}))
}

// A new revision goes out in waves: the second member gets nothing while the first one's
// Deployment is not healthy (as its real controller reports it: a bad image's Pods never run),
// then gets it once the first has stayed healthy for the soak.
func TestReleaseRollsOutInWaves(t *testing.T) {
	env := startDelivery(t)
	appNS := "app-waves"
	env.appNamespace(t, appNS)
	env.decide(t, "member-1", "member-2") // groups 0 and 1, as the placement numbers them
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "waves", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, deployment("web", badImage))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		Rollout:         &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups, SoakSeconds: 3},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	got := env.waitRelease(t, "waves", "first wave applied", func(r *v1alpha1.Release) bool {
		return phase(r, v1alpha1.PhaseProgressing) == 1 && phase(r, v1alpha1.PhasePending) == 1
	})
	require.Equal(t, int32(1), got.Status.Wave)
	require.Equal(t, int32(2), got.Status.Waves)
	time.Sleep(2 * time.Second)
	_, err = env.members["member-2"].AppsV1().Deployments(appNS).Get(t.Context(), "web", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the second wave started before the first was healthy: %v", err)

	// A good image: member-1's Deployment controller makes it Available; the second wave waits
	// out the soak from then.
	env.updateRelease(t, env.ns, "waves", func(cur *v1alpha1.Release) { cur.Spec.Source.Manifests = manifests(t, deployment("web")) })
	healthy := waitAvailable(t, env.members["member-1"], appNS, "web", "registry.example/web:1")
	env.waitRelease(t, "waves", "second wave applied", func(r *v1alpha1.Release) bool {
		return r.Status.Wave == 2 && phase(r, v1alpha1.PhasePending) == 0
	})
	require.GreaterOrEqual(t, time.Since(healthy), 2*time.Second, "the second wave did not wait for the soak (3 s, less polling's slack)")
	env.waitRelease(t, "waves", "available", func(r *v1alpha1.Release) bool { return condition(r, v1alpha1.ReleaseAvailable) == metav1.ConditionTrue })
	waitAvailable(t, env.members["member-2"], appNS, "web", "registry.example/web:1")
	// Once the last wave has soaked too, the rollout is Complete.
	env.waitRelease(t, "waves", "complete", func(r *v1alpha1.Release) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseProgressing)
		return c != nil && c.Reason == "Complete" && c.ObservedGeneration == r.Generation
	})
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "waves", metav1.DeleteOptions{}))
}

// A bad image fails its wave: past its progress deadline the first wave's member is Failed, the
// rollout stops (maxFailures 0), and the next wave never gets the image; the first member's old
// Pods keep serving, as the Deployment controller keeps them.
func TestBadImageStopsAtItsWave(t *testing.T) {
	env := startDelivery(t)
	appNS := "app-bad-image"
	env.appNamespace(t, appNS)
	env.decide(t, "member-1", "member-2")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, deployment("web"))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		Rollout:         &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups, ProgressDeadlineSeconds: ptr.To[int32](4)},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "bad", "available on both", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })

	env.updateRelease(t, env.ns, "bad", func(cur *v1alpha1.Release) { cur.Spec.Source.Manifests = manifests(t, deployment("web", badImage)) })
	got := env.waitRelease(t, "bad", "stalled at the first wave", func(r *v1alpha1.Release) bool {
		st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return st != nil && st.Status == metav1.ConditionTrue && st.Reason == "TooManyFailures"
	})
	require.Equal(t, "member-1", got.Status.Worst[0].Cluster)
	require.Equal(t, v1alpha1.PhaseFailed, got.Status.Worst[0].Phase)
	time.Sleep(2 * time.Second)
	d, err := env.members["member-2"].AppsV1().Deployments(appNS).Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "registry.example/web:1", d.Spec.Template.Spec.Containers[0].Image, "the next wave got the bad image")
	d, err = env.members["member-1"].AppsV1().Deployments(appNS).Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, badImage, d.Spec.Template.Spec.Containers[0].Image)
	require.Equal(t, int32(1), d.Status.AvailableReplicas, "the old Pod stopped serving")

	// The events say what an operator watches for, each once.
	var events map[string][]string
	require.Eventually(t, func() bool {
		events = env.releaseEvents(t, "bad")
		return len(events[delivery.EventRolloutStopped]) > 0
	}, 10*time.Second, 100*time.Millisecond, "no RolloutStopped event: %v", events)
	require.Equal(t, []string{"revision " + got.Status.Revision + ": 2 members in 2 waves"}, events[delivery.EventRolloutStarted])
	require.Len(t, events[delivery.EventMemberFailed], 1, "%v", events)
	require.Contains(t, events[delivery.EventMemberFailed][0], "member-1: ")
	require.Contains(t, events[delivery.EventRolloutStopped][0], "1 members failed (member-1): the rollout stopped in wave 1 of 2")
	for _, m := range events[delivery.EventWaveStarted] {
		require.NotContains(t, m, got.Status.Revision, "a wave of the bad revision began")
	}
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "bad", metav1.DeleteOptions{}))
}

// waitAvailable waits until the Deployment on a member runs image, every replica updated and
// available, as its controller reports it, and returns when it saw that.
func waitAvailable(t *testing.T, kube kubernetes.Interface, ns, name, image string) time.Time {
	t.Helper()
	require.Eventually(t, func() bool {
		d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && d.Spec.Template.Spec.Containers[0].Image == image && d.Status.ObservedGeneration == d.Generation &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas
	}, time.Minute, 50*time.Millisecond, "deployment %s/%s of %s not Available", ns, name, image)
	return time.Now()
}

// deploy/controllers/releases-clusterrole.yaml and deploy/health/clusterrole.yaml are all the
// Controller needs in the registry: run as a service account bound to exactly them in one cluster
// set, it delivers a Release there, writes its status and slices, and finalizes it.
func TestReleasesRunWithTheShippedClusterRoles(t *testing.T) {
	ns := fleettest.CopySet(t, lf)
	sa := serviceAccountWithRoles(t, ns, "releases", nil)
	env := startDeliveryIn(t, ns, sa)

	env.decide(t, "member-1")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "rbac", Namespace: ns}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap("rbac-"+ns, map[string]string{"k": "v"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "rbac", "available as the service account", func(r *v1alpha1.Release) bool {
		return condition(r, v1alpha1.ReleaseAvailable) == metav1.ConditionTrue
	})
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(ns).Delete(t.Context(), "rbac", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := env.registry.ClusterregistryV1alpha1().Releases(ns).Get(t.Context(), "rbac", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 20*time.Second, 100*time.Millisecond, "the Release was not finalized as the service account")
	_, err = env.members["member-1"].CoreV1().ConfigMaps("default").Get(t.Context(), "rbac-"+ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Release's object stayed: %v", err)
}

// A controller that cannot read the PlacementDecisions (here its role lacks them) says so on each
// Release, Available Unknown and Stalled naming what to grant, rather than wait for them and leave
// the Release's last Available True standing.
func TestUnreadableDecisionsAreSaid(t *testing.T) {
	env := startDelivery(t)
	env.decide(t, "member-1")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "blind", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap("blind-"+env.ns, map[string]string{"k": "v"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "blind", "available", func(r *v1alpha1.Release) bool { return condition(r, v1alpha1.ReleaseAvailable) == metav1.ConditionTrue })
	env.stop()

	sa := serviceAccountWithRoles(t, env.ns, "blind", func(role *rbacv1.ClusterRole) {
		role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "placementdecisions") })
	})
	env = startDeliveryIn(t, env.ns, sa)
	got := env.waitRelease(t, "blind", "the outage said", func(r *v1alpha1.Release) bool {
		return condition(r, v1alpha1.ReleaseAvailable) == metav1.ConditionUnknown
	})
	stalled := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseStalled)
	require.Equal(t, "DecisionsUnavailable", stalled.Reason)
	require.Contains(t, stalled.Message, "forbidden")
	require.Contains(t, stalled.Message, "placementdecisions.multicluster.x-k8s.io")
	env.stop()
	// The admin's controller finalizes it.
	env = startDeliveryIn(t, env.ns, nil)
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "blind", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Get(t.Context(), "blind", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond, "not finalized")
}

// A Release reaches only its own cluster set's members, even on a Fleet of several sets: a
// decision that names another set's member (a PlacementDecision written by hand) delivers
// nothing there.
func TestReleaseReachesOnlyItsOwnClusterSet(t *testing.T) {
	own := fleettest.CopySet(t, lf, "member-1")
	other := fleettest.CopySet(t, lf, "member-2")
	env := startDeliveryIn(t, own, nil, other)
	_, err := env.decisions.ApisV1alpha1().PlacementDecisions(own).Create(t.Context(), &cpv1alpha1.PlacementDecision{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{cpv1alpha1.DecisionKeyLabel: "web"}},
		Decisions: []cpv1alpha1.ClusterDecision{
			{ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Namespace: other, Name: "member-2"}},
			{ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Name: "member-1"}},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	name := "cross-" + own
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "cross", Namespace: own}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap(name, map[string]string{"k": "v"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
	}}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(own).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	got := env.waitRelease(t, "cross", "its own member ready", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	require.Equal(t, int32(1), got.Status.Members, "the other set's member was counted")
	available := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseAvailable)
	require.Contains(t, available.Message, "the decision names 1 Clusters of other cluster sets ("+other+"/member-2), refused",
		"the refused reference was dropped without a word")
	_, err = env.members["member-1"].CoreV1().ConfigMaps("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	_, err = env.members["member-2"].CoreV1().ConfigMaps("default").Get(t.Context(), name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Release reached another cluster set's member: %v", err)
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(own).Delete(t.Context(), "cross", metav1.DeleteOptions{}))
}

// Past maxFailures a rollout stops before the next wave and says so; allowed one more failure, it
// goes on. The first wave's member fails (a namespace it lacks), the second's has it.
func TestRolloutStopsPastMaxFailures(t *testing.T) {
	env := startDelivery(t)
	appNS := "only-on-member-2"
	_, err := env.members["member-2"].CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	env.decide(t, "member-1", "member-2") // groups 0 and 1, as the placement numbers them
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "stops", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, configMap("stops", map[string]string{"k": "v"}))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		Rollout:         &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups},
	}}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	got := env.waitRelease(t, "stops", "stalled after the first wave", func(r *v1alpha1.Release) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "TooManyFailures"
	})
	require.Contains(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseStalled).Message, "the rollout stopped in wave 1 of 2; wave 2 does not begin")
	require.Equal(t, int32(1), phase(got, v1alpha1.PhaseFailed))
	require.Equal(t, int32(1), phase(got, v1alpha1.PhasePending))
	_, err = env.members["member-2"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "stops", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the next wave started past maxFailures: %v", err)

	// The failed member leaves the decision (excluded): the stop is recorded and holds, and
	// member-2, whose wave is now the first, is still not given the stopped revision.
	env.decide(t, "member-2")
	got = env.waitRelease(t, "stops", "still stopped without the failed member", func(r *v1alpha1.Release) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return r.Status.Members == 1 && c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "the stop is recorded")
	})
	time.Sleep(time.Second)
	_, err = env.members["member-2"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "stops", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the stopped revision reached member-2 once the failed member left: %v", err)
	require.Equal(t, "RolloutStopped", memberPhase(got, "member-2").Reason)
	env.decide(t, "member-1", "member-2")

	env.updateRelease(t, env.ns, "stops", func(cur *v1alpha1.Release) {
		cur.Spec.Rollout.MaxFailures = ptr.To(intstr.FromInt32(1))
	})
	got = env.waitRelease(t, "stops", "the second wave ready", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 && r.Status.Wave == 2 })
	require.Equal(t, metav1.ConditionFalse, condition(got, v1alpha1.ReleaseStalled))
	require.Equal(t, metav1.ConditionTrue, condition(got, v1alpha1.ReleaseDegraded))
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "stops", metav1.DeleteOptions{}))
}

// A Deployment scaled by hand on a member (an operator's kubectl scale, an autoscaler) keeps its
// replicas when the Release ignores /spec/replicas: the real controllers run them all, and the
// Release stays Ready without putting its own count back.
func TestScaledByHandUnderDriftIgnore(t *testing.T) {
	env := startDelivery(t)
	appNS := "app-scaled"
	env.appNamespace(t, appNS)
	env.decide(t, "member-1")
	d := deployment("web")
	d.Spec.Replicas = ptr.To[int32](2)
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, d)},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		Drift:           &v1alpha1.ReleaseDrift{Ignore: []v1alpha1.ReleaseIgnoredFields{{Group: "apps", Kind: "Deployment", Paths: []string{"/spec/replicas"}}}},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "scaled", "ready", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	member := env.members["member-1"]
	waitAvailable(t, member, appNS, "web", "registry.example/web:1")

	scale, err := member.AppsV1().Deployments(appNS).GetScale(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	scale.Spec.Replicas = 4
	_, err = member.AppsV1().Deployments(appNS).UpdateScale(t.Context(), "web", scale, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitAvailable(t, member, appNS, "web", "registry.example/web:1")
	time.Sleep(3 * time.Second) // the Release had time to put its count back, had it wanted to
	got, err := member.AppsV1().Deployments(appNS).Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(4), *got.Spec.Replicas, "the Release put its replicas back")
	require.Equal(t, int32(4), got.Status.AvailableReplicas)
	r := env.waitRelease(t, "scaled", "still ready", func(r *v1alpha1.Release) bool { return true })
	require.Equal(t, int32(1), r.Status.Ready, "%+v", r.Status)
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "scaled", metav1.DeleteOptions{}))
}

// Under drift Warn an edit on a member is reported, not undone, and the report names the object
// and the fields the edit took.
func TestDriftWarnNamesObjectAndFields(t *testing.T) {
	env := startDelivery(t)
	env.decide(t, "member-1")
	name := "warned-" + env.ns
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "warned", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap(name, map[string]string{"color": "blue", "size": "m"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
		Drift:     &v1alpha1.ReleaseDrift{Policy: v1alpha1.DriftWarn},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "warned", "ready", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	kube := env.members["member-1"]
	cm, err := kube.CoreV1().ConfigMaps("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["color"] = "red"
	_, err = kube.CoreV1().ConfigMaps("default").Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	got := env.waitRelease(t, "warned", "drifted", func(r *v1alpha1.Release) bool { return phase(r, v1alpha1.PhaseDrifted) == 1 })
	require.Equal(t, "ConfigMap default/"+name+": changed by another writer: .data.color", got.Status.Worst[0].Message)
	time.Sleep(time.Second)
	cm, err = kube.CoreV1().ConfigMaps("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "red", cm.Data["color"], "Warn corrected the edit")
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "warned", metav1.DeleteOptions{}))
}

// A watch can miss what happened while it was away. Every Recheck (here 1 s) the Controller
// compares each object it applied with the member's watch cache: with its watch events dropped, an
// edit by another writer is corrected and a deleted object made again all the same.
func TestRecheckFindsWhatTheWatchMissed(t *testing.T) {
	env := startDeliveryWith(t, fleettest.CopySet(t, lf), nil, func(o *delivery.ControllerOptions) { o.Recheck = time.Second })
	env.decide(t, "member-1")
	name := "rechecked-" + env.ns
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "rechecked", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap(name, map[string]string{"color": "blue"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "rechecked", "ready", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	delivery.Deafen(env.ctrl, true)
	defer delivery.Deafen(env.ctrl, false)

	configMaps := env.members["member-1"].CoreV1().ConfigMaps("default")
	cm, err := configMaps.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["color"] = "red"
	_, err = configMaps.Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cm, err := configMaps.Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && cm.Data["color"] == "blue"
	}, 15*time.Second, 100*time.Millisecond, "the edit the watch missed was not corrected")

	require.NoError(t, configMaps.Delete(t.Context(), name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := configMaps.Get(t.Context(), name, metav1.GetOptions{})
		return err == nil
	}, 15*time.Second, 100*time.Millisecond, "the object deleted while the watch missed it was not made again")
	env.waitRelease(t, "rechecked", "ready again", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	// Rechecks at steady state write nothing: not to the registry, not to the member.
	delivery.Deafen(env.ctrl, false)
	time.Sleep(2 * time.Second)
	writes := env.ctrl.Writes()
	cm, err = configMaps.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	time.Sleep(3 * time.Second)
	require.Equal(t, writes, env.ctrl.Writes(), "rechecks of a Ready Release wrote")
	again, err := configMaps.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, cm.ResourceVersion, again.ResourceVersion, "rechecks of a Ready Release applied again")
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "rechecked", metav1.DeleteOptions{}))
}

// releaseEvents are the messages of the events on Release name, by reason.
func (e *deliveryEnv) releaseEvents(t *testing.T, name string) map[string][]string {
	t.Helper()
	list, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Events(e.ns).List(t.Context(),
		metav1.ListOptions{FieldSelector: "involvedObject.kind=Release,involvedObject.name=" + name})
	require.NoError(t, err)
	out := map[string][]string{}
	for _, ev := range list.Items {
		for range ev.Count {
			out[ev.Reason] = append(out[ev.Reason], ev.Message)
		}
	}
	return out
}

// With onFailure Rollback, a revision that fails past maxFailures goes back: every member it
// reached returns to the last revision Ready everywhere (here member-1, of the first wave, to its
// good image, through the real Deployment controller), the Release says RolledBack naming the
// failed member, the failed revision is not tried again, and a new spec rolls out as any.
func TestFailedRolloutRollsBack(t *testing.T) {
	env := startDelivery(t)
	appNS := "app-rollback"
	env.appNamespace(t, appNS)
	env.decide(t, "member-1", "member-2")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "back", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, deployment("web"))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		Rollout: &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups, ProgressDeadlineSeconds: ptr.To[int32](4),
			OnFailure: v1alpha1.FailureRollback},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	good := env.waitRelease(t, "back", "available on both", func(r *v1alpha1.Release) bool {
		return condition(r, v1alpha1.ReleaseAvailable) == metav1.ConditionTrue
	}).Status.Revision
	forgedReached := forgeCompleteRevision(t, env, "back")

	env.updateRelease(t, env.ns, "back", func(cur *v1alpha1.Release) { cur.Spec.Source.Manifests = manifests(t, deployment("web", badImage)) })
	got := env.waitRelease(t, "back", "rolled back", func(r *v1alpha1.Release) bool {
		st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return st != nil && st.Reason == "RolledBack" && r.Status.Ready == 2
	})
	require.Equal(t, good, got.Status.Revision, "the rollback went to another revision than the last Ready everywhere")
	require.False(t, forgedReached(), "the forged record's Deployment reached a member")
	stalled := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseStalled)
	require.Contains(t, stalled.Message, "1 members failed (member-1)")
	require.Contains(t, stalled.Message, "every member it reached returns to revision 1 ("+good+")")
	t.Logf("Stalled %s: %s", stalled.Reason, stalled.Message)
	require.Equal(t, metav1.ConditionTrue, condition(got, v1alpha1.ReleaseAvailable))
	healthy := waitAvailable(t, env.members["member-1"], appNS, "web", "registry.example/web:1")
	d, err := env.members["member-2"].AppsV1().Deployments(appNS).Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "registry.example/web:1", d.Spec.Template.Spec.Containers[0].Image, "the second wave got the bad image")
	// Events reach the registry through the recorder's broadcaster, after the status: on a
	// loaded machine (a cold CI run compiling beside the tests) 10 s was once not enough.
	events := env.releaseEvents(t, "back")
	for deadline := time.Now().Add(30 * time.Second); len(events[delivery.EventRolledBack]) != 1 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		events = env.releaseEvents(t, "back")
	}
	require.Len(t, events[delivery.EventRolledBack], 1, "the Release's events: %v", events)

	// The failed revision is not tried again while the spec stands.
	time.Sleep(3 * time.Second)
	d, err = env.members["member-1"].AppsV1().Deployments(appNS).Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "registry.example/web:1", d.Spec.Template.Spec.Containers[0].Image, "the failed revision was tried again %s after the rollback", time.Since(healthy))

	// A new spec rolls out as any.
	env.updateRelease(t, env.ns, "back", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = manifests(t, deployment("web", "registry.example/web:2"))
	})
	env.waitRelease(t, "back", "the next revision available", func(r *v1alpha1.Release) bool {
		return r.Status.Revision != good && condition(r, v1alpha1.ReleaseAvailable) == metav1.ConditionTrue && condition(r, v1alpha1.ReleaseStalled) == metav1.ConditionFalse
	})
	waitAvailable(t, env.members["member-2"], appNS, "web", "registry.example/web:2")
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "back", metav1.DeleteOptions{}))
}

// forgeCompleteRevision plays whoever may write ControllerRevisions in the cluster set: a record
// of its own in Release name's history, the newest, claiming to have been Ready everywhere, and
// labelled with the very revision it renders to, so that a rollback would deliver its source
// (a Deployment named "forged") with the members' accounts. reached says whether it did.
func forgeCompleteRevision(t *testing.T, env *deliveryEnv, name string) (reached func() bool) {
	t.Helper()
	rel := env.waitRelease(t, name, "its last complete revision in status", func(r *v1alpha1.Release) bool {
		return r.Status.LastCompleteRevision != "" && r.Status.LastCompleteRevision == r.Status.Revision
	})
	evil := rel.DeepCopy()
	evil.Spec.Source.Manifests = manifests(t, deployment("forged", "registry.example/forged:1"))
	b, err := delivery.Render(evil, delivery.Inputs{})
	require.NoError(t, err)
	record, err := json.Marshal(delivery.RevisionRecord{Source: evil.Spec.Source, TargetNamespace: evil.Spec.TargetNamespace})
	require.NoError(t, err)
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + b.Revision, Namespace: rel.Namespace,
		Labels:          map[string]string{v1alpha1.ReleaseLabel: name, v1alpha1.RevisionLabel: b.Revision},
		Annotations:     map[string]string{delivery.CompleteAnnotation: "true"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rel, v1alpha1.SchemeGroupVersion.WithKind("Release"))}},
		Data: runtime.RawExtension{Raw: record}, Revision: 50}
	_, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).AppsV1().ControllerRevisions(rel.Namespace).Create(t.Context(), cr, metav1.CreateOptions{})
	require.NoError(t, err)
	return func() bool {
		for _, m := range env.members {
			if _, err := m.AppsV1().Deployments(rel.Spec.TargetNamespace).Get(t.Context(), "forged", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return true
			}
		}
		return false
	}
}

// A revision whose apply fails part way (a ConfigMap changed, then a kind the member does not
// serve) leaves the member with part of it: a rollback puts that part back too. (The watch's event
// of the changed ConfigMap came while the member was being applied to, and was dropped with the
// failure: the member stayed Progressing at the old revision with the new ConfigMap, found by
// BenchmarkDelivery's rollback at 1,000 members.)
func TestRollbackOfAPartlyAppliedRevision(t *testing.T) {
	env := startDelivery(t)
	env.decide(t, "member-1")
	name := "partly-" + env.ns
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "partly", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap(name, map[string]string{"color": "blue"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
		Rollout:   &v1alpha1.ReleaseRollout{OnFailure: v1alpha1.FailureRollback},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	good := env.waitRelease(t, "partly", "complete", func(r *v1alpha1.Release) bool { return r.Status.LastCompleteRevision != "" }).Status.Revision

	env.updateRelease(t, env.ns, "partly", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = append(manifests(t, configMap(name, map[string]string{"color": "red"})),
			runtime.RawExtension{Raw: []byte(`{"apiVersion":"widgets.example.com/v1","kind":"Widget","metadata":{"name":"w"}}`)})
	})
	got := env.waitRelease(t, "partly", "rolled back, Ready", func(r *v1alpha1.Release) bool {
		st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return st != nil && st.Reason == "RolledBack" && r.Status.Ready == 1
	})
	require.Equal(t, good, got.Status.Revision)
	cm, err := env.members["member-1"].CoreV1().ConfigMaps("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "blue", cm.Data["color"], "the part of the failed revision that was applied stayed")
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "partly", metav1.DeleteOptions{}))
}

// serviceAccountWithRoles is a config of a new service account of ns bound there to the shipped
// releases and health roles, each as change (if set) leaves it.
func serviceAccountWithRoles(t *testing.T, ns, name string, change func(*rbacv1.ClusterRole)) *rest.Config {
	t.Helper()
	admin := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := admin.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, file := range []string{"../deploy/controllers/releases-clusterrole.yaml", "../deploy/health/clusterrole.yaml"} {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var role rbacv1.ClusterRole
		require.NoError(t, yaml.UnmarshalStrict(data, &role))
		role.Name = ns + "-" + name + "-" + role.Name // one per test namespace, so that -count=N does not collide
		if change != nil {
			change(&role)
		}
		_, err = admin.RbacV1().ClusterRoles().Create(t.Context(), &role, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		})
		_, err = admin.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	sa := rest.AnonymousClientConfig(lf.Registry.Config)
	sa.BearerToken = tr.Status.Token
	return sa
}
