package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// controllers --controllers health,placements,releases delivers a Release to the members its
// Placement chose (health probes them Ready, placements decides): get releases and describe
// release show it, member by member.
func TestReleasesCommand(t *testing.T) {
	lf := sharedFleet(t)
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(t.Context(), lf.Registry.Config))
	ns := fleettest.CopySet(t, lf)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	_, err := registry.Placements(ns).Create(t.Context(), &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + ns + `"},"data":{"greeting":"hello"}}`
	_, err = registry.Releases(ns).Create(t.Context(), &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: []runtime.RawExtension{{Raw: []byte(cm)}}},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
		Feedback:  []v1alpha1.ReleaseFeedback{{Name: "greeting", Kind: "ConfigMap", ObjectName: ns, JSONPath: "{.data.greeting}"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "controllers", "--controllers", "health,placements,releases",
			"--interval", "300ms", "--failure-threshold", "1", "--success-threshold", "1"}, &logs, &logs)
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-done, "logs:\n%s", logs.String())
	}()
	var rel *v1alpha1.Release
	require.Eventually(t, func() bool {
		rel, err = registry.Releases(ns).Get(t.Context(), "web", metav1.GetOptions{})
		return err == nil && rel.Status.Ready == 2
	}, 60*time.Second, 100*time.Millisecond, "never delivered; status %+v; logs:\n%s", rel, logs.String())
	for _, m := range lf.Members {
		got, err := kubernetes.NewForConfigOrDie(m.Config).CoreV1().ConfigMaps("default").Get(t.Context(), ns, metav1.GetOptions{})
		require.NoError(t, err, m.Name)
		require.Equal(t, "hello", got.Data["greeting"])
	}

	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr syncBuffer
		code := run(t.Context(), append([]string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := cmd("get", "releases")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^NAME\s+PLACEMENT\s+REVISION\s+MEMBERS\s+READY\s+AVAILABLE\s+REASON\s+AGE$`, out)
	require.Regexp(t, `(?m)^web\s+web\s+`+rel.Status.Revision+`\s+2\s+2\s+True\s+Complete\s+\S+$`, out)
	code, out, errOut = cmd("get", "releases", "-o", "wide")
	require.Equal(t, 0, code, errOut)
	// What spec.feedback read, from the status slices: both members read the same value.
	require.Regexp(t, `(?m)^web\s+web\s+\S+\s+2\s+2\s+True\s+Complete\s+\S+\s+1/1\s+Ready=2\s+2 of 2 members ready\s+greeting=hello$`, out)
	code, out, errOut = cmd("get", "releases", "-o", "name")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "release.clusterregistry.k8s.io/web\n", out)

	code, out, errOut = cmd("describe", "release", "web")
	require.Equal(t, 0, code, errOut)
	t.Logf("describe release web:\n%s", out)
	require.Regexp(t, `(?m)^Placement:\s+web$`, out)
	require.Regexp(t, `(?m)^Source:\s+1 manifests, inline$`, out)
	require.Regexp(t, `(?m)^Members:\s+2, 2 ready \(Ready=2\)$`, out)
	require.Regexp(t, `(?m)^\s+Available\s+True\s+AllReady\s+`, out)
	require.Regexp(t, `(?m)^\s+member-1\s+Ready\s+`+rel.Status.Revision+`\s+-\s+\S+ ago\s+-$`, out)
	require.Regexp(t, `(?m)^\s+member-2\s+Ready\s+`+rel.Status.Revision+`\s+`, out)

	code, _, errOut = cmd("describe", "release", "nothere")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `releases.clusterregistry.k8s.io "nothere" not found`)
	code, _, errOut = cmd("describe", "release")
	require.Equal(t, 2, code, "a usage error: %s", errOut)

	rolloutVerbs(t, lf, ns, rel.Status.Revision, cmd)
}

// rolloutVerbs plays rollout's verbs on Release web of ns, delivered at revision first.
func rolloutVerbs(t *testing.T, lf *localfleet.Fleet, ns, first string, cmd func(args ...string) (int, string, string)) {
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	member := kubernetes.NewForConfigOrDie(lf.Members[0].Config).CoreV1().ConfigMaps("default")
	greeting := func() string {
		cm, err := member.Get(t.Context(), ns, metav1.GetOptions{})
		require.NoError(t, err)
		return cm.Data["greeting"]
	}
	s := &rolloutSteps{lf: lf, ns: ns, first: first, cmd: cmd, registry: registry, member: member, greeting: greeting}
	s.historyAndStatus(t)
	s.undo(t)
	s.forgedRecord(t)
	s.pauseAndResume(t)
	s.restart(t)
	s.approval(t)
	s.diff(t)
	s.usageErrors(t)
}

// rolloutSteps is what the parts of rolloutVerbs share, in order: each starts where the one before it
// left Release web.
type rolloutSteps struct {
	lf       *localfleet.Fleet
	ns       string
	first    string
	cmd      func(args ...string) (int, string, string)
	registry crv1alpha1.ClusterregistryV1alpha1Interface
	member   corev1client.ConfigMapInterface
	greeting func() string
}

// historyAndStatus: rollout history lists the revisions; rollout status waits for a change with a
// cause.
func (s *rolloutSteps) historyAndStatus(t *testing.T) {
	ns, first, cmd, registry, greeting := s.ns, s.first, s.cmd, s.registry, s.greeting
	code, out, errOut := cmd("rollout", "history", "release/web")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^REVISION\s+HASH\s+CREATED\s+WAVES\s+CHANGE-CAUSE$`, out)
	require.Regexp(t, `(?m)^1\s+`+first+`\s+\S+ ago\s+1 begun, 1 finished\s+<none>$`, out)

	// A change with a cause: rollout status waits for it and says it rolled out.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rel, err := registry.Releases(ns).Get(t.Context(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		rel.Spec.Source.Manifests[0].Raw = []byte(strings.Replace(string(rel.Spec.Source.Manifests[0].Raw), "hello", "bye", 1))
		rel.Annotations = map[string]string{"kubernetes.io/change-cause": "say bye"}
		_, err = registry.Releases(ns).Update(t.Context(), rel, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	code, out, errOut = cmd("rollout", "status", "release/web", "--timeout", "60s")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Regexp(t, `release "web" successfully rolled out: revision \S+, 2 of 2 members ready\n$`, out)
	require.Equal(t, "bye", greeting())
	code, out, errOut = cmd("rollout", "history", "release", "web")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^2\s+\S+\s+\S+ ago\s+1 begun, 1 finished\s+say bye$`, out)
	t.Logf("rollout history release/web:\n%s", out)
	code, out, errOut = cmd("rollout", "history", "release/web", "--revision", "2")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "release.clusterregistry.k8s.io/web with revision #2 (")
	require.Contains(t, out, "Change cause: say bye\nWave 1: started ")
	require.Contains(t, out, "Made from:\n  source:\n    manifests:\n")
	t.Logf("rollout history release/web --revision 2:\n%s", out)
	code, _, errOut = cmd("rollout", "history", "release/web", "--revision", "9")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "unable to find revision 9 in its history")
}

// undo: rollout undo rolls the previous revision out again, recorded as the newest.
func (s *rolloutSteps) undo(t *testing.T) {
	first, cmd, greeting := s.first, s.cmd, s.greeting
	// Undo: the previous revision rolls out again, recorded as the newest.
	code, out, errOut := cmd("rollout", "undo", "release/web")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "release.clusterregistry.k8s.io/web rolled back to revision 1 ("+first+")\n", out)
	code, out, errOut = cmd("rollout", "status", "release/web", "--timeout", "60s")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Equal(t, "hello", greeting())
	require.Eventually(t, func() bool {
		_, out, _ = cmd("rollout", "history", "release/web")
		return regexp.MustCompile(`(?m)^3\s+` + first + `\s+\S+ ago\s+1 begun, 1 finished\s+rollout undo to revision 1`).MatchString(out)
	}, 10*time.Second, 100*time.Millisecond, "the undone revision is not revision 3:\n%s", out)
	code, _, errOut = cmd("rollout", "undo", "release/web", "--to-revision", "7")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "unable to find revision 7 in its history; it has revisions 2, 3 (rollout history lists them)",
		"the undone revision 1 came back as 3: say which numbers there are")
}

// forgedRecord: a record of a revision replaced by whoever may write ControllerRevisions is not
// delivered by undo.
func (s *rolloutSteps) forgedRecord(t *testing.T) {
	lf, ns, cmd, registry := s.lf, s.ns, s.cmd, s.registry
	// The attacker: whoever may write ControllerRevisions in the cluster set replaces revision 2's
	// record (its data is immutable: deleted and made again, labels, owner and number kept) with
	// one whose source is theirs, so that undo would deliver it.
	revisions := kubernetes.NewForConfigOrDie(lf.Registry.Config).AppsV1().ControllerRevisions(ns)
	crs, err := revisions.List(t.Context(), metav1.ListOptions{LabelSelector: "clusterregistry.k8s.io/release=web"})
	require.NoError(t, err)
	forged := 0
	for _, cr := range crs.Items {
		if cr.Revision == 2 {
			require.NoError(t, revisions.Delete(t.Context(), cr.Name, metav1.DeleteOptions{}))
			cr.ResourceVersion, cr.UID = "", ""
			cr.Data.Raw = []byte(strings.Replace(string(cr.Data.Raw), "bye", "forged", 1))
			_, err := revisions.Create(t.Context(), &cr, metav1.CreateOptions{})
			require.NoError(t, err)
			forged++
		}
	}
	require.Equal(t, 1, forged, "revision 2's record")
	code, _, errOut := cmd("rollout", "undo", "release/web", "--to-revision", "2")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "revision 2's record renders to revision ")
	require.Contains(t, errOut, "it is not put back")
	cur, err := registry.Releases(ns).Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, string(cur.Spec.Source.Manifests[0].Raw), "forged", "the forged record was put back")
}

// pauseAndResume: rollout pause and resume, with kubectl's errors.
func (s *rolloutSteps) pauseAndResume(t *testing.T) {
	cmd := s.cmd
	// Pause and resume, with kubectl's errors; a paused Release's status ends at once, exit 1.
	code, out, errOut := cmd("rollout", "pause", "release/web")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "release.clusterregistry.k8s.io/web paused\n", out)
	code, _, errOut = cmd("rollout", "pause", "release/web")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "release.clusterregistry.k8s.io/web is already paused")
	code, out, errOut = cmd("rollout", "status", "release/web", "--timeout", "30s")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `release "web" is paused (spec.suspend): 2 of 2 members ready; resume it to go on`)
	require.NotContains(t, errOut, "failed:", "a paused Release whose members are Ready said its rollout failed")
	require.Contains(t, errOut, "nothing failed")
	code, out, errOut = cmd("rollout", "resume", "release/web")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "release.clusterregistry.k8s.io/web resumed\n", out)
	code, _, errOut = cmd("rollout", "resume", "release/web")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is not paused")
}

// restart: rollout restart delivers again now.
func (s *rolloutSteps) restart(t *testing.T) {
	ns, cmd, registry, member, greeting := s.ns, s.cmd, s.registry, s.member, s.greeting
	// Restart delivers again now: under drift Ignore an edit by hand stays, until a restart.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rel, err := registry.Releases(ns).Get(t.Context(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		rel.Spec.Drift = &v1alpha1.ReleaseDrift{Policy: v1alpha1.DriftIgnore}
		_, err = registry.Releases(ns).Update(t.Context(), rel, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	code, out, errOut := cmd("rollout", "status", "release/web", "--timeout", "60s")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	cm, err := member.Get(t.Context(), ns, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["greeting"] = "edited"
	_, err = member.Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	time.Sleep(time.Second)
	require.Equal(t, "edited", greeting(), "Ignore corrected the edit")
	code, out, errOut = cmd("rollout", "restart", "release/web")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "release.clusterregistry.k8s.io/web restarted\n", out)
	require.Eventually(t, func() bool { return greeting() == "hello" }, 20*time.Second, 100*time.Millisecond, "the restart did not deliver again")
}

// approval: a change waits at its first wave until approved.
func (s *rolloutSteps) approval(t *testing.T) {
	ns, cmd, registry, greeting := s.ns, s.cmd, s.registry, s.greeting
	// Manual approval: a change waits at its first wave until approved.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rel, err := registry.Releases(ns).Get(t.Context(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		rel.Spec.Rollout = &v1alpha1.ReleaseRollout{Approval: v1alpha1.ApprovalManual}
		rel.Spec.Source.Manifests[0].Raw = []byte(strings.Replace(string(rel.Spec.Source.Manifests[0].Raw), "hello", "approved", 1))
		_, err = registry.Releases(ns).Update(t.Context(), rel, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	var code int
	var out string
	require.Eventually(t, func() bool {
		code, out, _ = cmd("rollout", "status", "release/web", "--watch=false")
		return code == 0 && strings.Contains(out, "wave 1 of 1 of revision ") && strings.Contains(out, "awaits approval: clusterregistry rollout approve release/web")
	}, 20*time.Second, 100*time.Millisecond, "not awaiting approval: %s", out)
	// Interrupted (SIGTERM cancels the command's context) while it waits: it says so, not that it
	// timed out.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	var stdout, stderr syncBuffer
	code = run(ctx, []string{"--kubeconfig", s.lf.Registry.Kubeconfig, "-n", ns, "rollout", "status", "release/web"}, &stdout, &stderr)
	cancel()
	require.Equal(t, 1, code, stdout.String())
	require.Contains(t, stderr.String(), "interrupted before the rollout finished (it goes on; ", "an interrupt read as a timeout")
	// Each member of the held wave says why (it said WaitingForWave before).
	require.Eventually(t, func() bool {
		r, err := registry.Releases(ns).Get(t.Context(), "web", metav1.GetOptions{})
		return err == nil && len(r.Status.Worst) > 0 && r.Status.Worst[0].Reason == "AwaitingApproval" &&
			strings.Contains(r.Status.Worst[0].Message, "wave 1 awaits approval")
	}, 10*time.Second, 100*time.Millisecond, "the members do not say they await approval")
	time.Sleep(time.Second)
	require.Equal(t, "hello", greeting(), "the wave began unapproved")
	code, out, errOut := cmd("rollout", "approve", "release/web")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^release.clusterregistry.k8s.io/web wave 1 of revision \S+ approved\n$`, out)
	code, out, errOut = cmd("rollout", "status", "release/web", "--timeout", "60s")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	t.Logf("rollout status release/web:\n%s", out)
	require.Equal(t, "approved", greeting())
	code, _, errOut = cmd("rollout", "approve", "release/web")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "every wave (1) of revision")
}

// diff: diff shows what a file would change, member by member, and writes nothing.
func (s *rolloutSteps) diff(t *testing.T) {
	lf, ns, cmd, registry, greeting := s.lf, s.ns, s.cmd, s.registry, s.greeting
	// diff: nothing would change for the Release as it is; a file's change shows member by
	// member, and nothing is written.
	code, out, errOut := cmd("diff", "release", "web")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Empty(t, out)
	rel, err := registry.Releases(ns).Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	rel.Spec.Source.Manifests[0].Raw = []byte(strings.Replace(string(rel.Spec.Source.Manifests[0].Raw), "approved", "diffed", 1))
	rel.APIVersion, rel.Kind = v1alpha1.SchemeGroupVersion.String(), "Release"
	rel.ManagedFields, rel.Status = nil, v1alpha1.ReleaseStatus{}
	raw, err := yaml.Marshal(rel)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "web.yaml")
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	code, out, errOut = cmd("diff", "release", "-f", file)
	require.Equal(t, 1, code, "%s%s", out, errOut)
	for _, m := range lf.Members {
		require.Contains(t, out, "diff -u -N "+m.Name+"/LIVE/v1.ConfigMap.default."+ns+" "+m.Name+"/MERGED/v1.ConfigMap.default."+ns+"\n")
	}
	require.Contains(t, out, "-  greeting: approved\n+  greeting: diffed\n")
	t.Logf("diff release -f web.yaml:\n%s", out)
	require.Equal(t, "approved", greeting(), "diff wrote")

	// With createNamespace, into a namespace the members lack: the namespace would be made, and
	// the objects in it created (the dry run failed on every object before, exit 2, and counted
	// objects as members).
	rel.Spec.CreateNamespace, rel.Spec.TargetNamespace = true, "ws-"+ns
	raw, err = yaml.Marshal(rel)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	code, out, errOut = cmd("diff", "release", "-f", file)
	require.Equal(t, 1, code, "%s%s", out, errOut)
	require.Empty(t, errOut)
	for _, m := range lf.Members {
		require.Contains(t, out, m.Name+"/MERGED/v1.Namespace.ws-"+ns+"\n")
		require.Contains(t, out, m.Name+"/MERGED/v1.ConfigMap.ws-"+ns+"."+ns+"\n")
	}
	_, err = kubernetes.NewForConfigOrDie(lf.Members[0].Config).CoreV1().Namespaces().Get(t.Context(), "ws-"+ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "diff made the namespace: %v", err)

	// With a Deployment divided across the members: each diffed at its share, which is said.
	deploy := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"shop-` + ns + `"},"spec":{"selector":{"matchLabels":{"app":"shop"}},` +
		`"template":{"metadata":{"labels":{"app":"shop"}},"spec":{"containers":[{"name":"shop","image":"registry.example/shop:1"}]}}}}`
	rel.Spec.CreateNamespace, rel.Spec.TargetNamespace = false, ""
	rel.Spec.Source.Manifests = append(rel.Spec.Source.Manifests, runtime.RawExtension{Raw: []byte(deploy)})
	total := int32(2 * len(lf.Members))
	rel.Spec.Divide = []v1alpha1.ReleaseDivision{{Name: "shop", Group: "apps", Kind: "Deployment", ObjectName: "shop-" + ns, Replicas: total}}
	raw, err = yaml.Marshal(rel)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	code, out, errOut = cmd("diff", "release", "-f", file)
	require.Equal(t, 1, code, "%s%s", out, errOut)
	for _, m := range lf.Members {
		require.Contains(t, errOut, fmt.Sprintf("member %s: 2 of the %d replicas of Deployment shop-%s (spec.divide shop)\n", m.Name, total, ns))
		require.Contains(t, out, m.Name+"/MERGED/apps.v1.Deployment.default.shop-"+ns+"\n")
	}
	require.Contains(t, out, "+  replicas: 2\n")
}

// usageErrors: usage errors exit 2.
func (s *rolloutSteps) usageErrors(t *testing.T) {
	cmd := s.cmd
	// Usage errors exit 2.
	for _, args := range [][]string{{"diff", "release"}, {"diff", "release", "web", "-f", "x.yaml"}, {"rollout", "history"}, {"rollout", "undo", "deployment/web"}, {"rollout", "status", "web"}, {"rollout", "undo", "release/web", "--to-revision", "-1"}} {
		code, _, errOut := cmd(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
	}
}
