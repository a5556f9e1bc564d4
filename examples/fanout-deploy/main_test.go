package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/gobuild"
)

func TestMain(m *testing.M) {
	// -short runs the unit tests of pure logic, without the API-server binaries; every test here
	// runs against real servers.
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipped under -short: these tests need kube-apiserver and etcd")
		os.Exit(0)
	}
	logf.SetLogger(logr.Discard()) // envtest logs through controller-runtime's logger
	os.Exit(m.Run())
}

func TestBadFlags(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad.yaml"), "apiVersion: v1\nkind: ConfigMap\n---\nkind: Secret\nmetadata: {name: s}\n---\n{not yaml: [\n")
	writeFile(t, filepath.Join(dir, "dup.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"--name is required", "--image is required, unless --delete"}},
		{[]string{"--name", "Web", "--image", "x"}, []string{`--name "Web" is not a valid Deployment name`}},
		{[]string{"--name", "web", "--delete", "--selector", "a in ("}, []string{"--selector: unable to parse"}},
		{[]string{"--name", "web", "--image", "x", "--prefer", "secret,magic"}, []string{`--prefer: unknown provider type "magic"`}},
		{[]string{"--name", "web", "--image", "x", "--allow-exec", "aws eks get-token", "--allow-exec-args", ""},
			[]string{`--allow-exec "aws eks get-token": want a command alone; a command with arguments goes in --allow-exec-args`, "--allow-exec-args is empty"}},
		{[]string{"--name", "web", "--image", "x", "--replicas", "-1", "--concurrency", "-2", "--timeout", "0s"},
			[]string{"--replicas -1", "--concurrency -2", "--timeout 0s"}},
		{[]string{"--name", "web", "--image", "x", "--member-namespace", "Not/Valid"}, []string{`--member-namespace "Not/Valid"`}},
		{[]string{"--name", "web", "--image", "x", "stray"}, []string{`unexpected argument "stray"`}},
		{[]string{"--no-such-flag"}, []string{"unknown flag: --no-such-flag"}},
		{[]string{"--name", "web", "--image", "x", "--placement", "web", "-l", "env=prod"}, []string{"--placement and --selector conflict"}},
		{[]string{"--name", "web", "--image", "x", "--dry-run=client"}, []string{"--dry-run=client: want server or none"}},
		{[]string{"-f", filepath.Join(dir, "nope.yaml")}, []string{"-f " + filepath.Join(dir, "nope.yaml") + ": stat"}},
		{[]string{"-f", empty}, []string{"-f " + empty + ": the directory has no .yaml, .yml or .json file"}},
		{[]string{"-f", filepath.Join(dir, "dup.yaml"), "--image", "x", "--replicas", "2"}, []string{"-f and --image conflict", "-f and --replicas conflict"}},
		// Every problem of a file, each named by its document, and nothing applied anywhere.
		{[]string{"-f", filepath.Join(dir, "bad.yaml")}, []string{
			filepath.Join(dir, "bad.yaml") + ", document 1: no metadata.name",
			filepath.Join(dir, "bad.yaml") + ", document 2: no apiVersion",
			filepath.Join(dir, "bad.yaml") + ", document 3: ",
		}},
		{[]string{"-f", filepath.Join(dir, "dup.yaml")}, []string{filepath.Join(dir, "dup.yaml") + ", document 2: configmap/a is also in " + filepath.Join(dir, "dup.yaml") + ", document 1"}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != 2 || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q", tc.args, code, stdout.String())
		}
		for _, want := range tc.want {
			if !strings.Contains(stderr.String(), "fanout-deploy: "+want) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, want, stderr.String())
			}
		}
	}
}

// TestEndToEnd runs the built command against a local fleet of a registry and three members, as
// the README's demo does.
func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(gobuild.Commands(t, ".", "."), "fanout-deploy")
	lf, err := localfleet.Start(ctx, localfleet.Options{Members: 3, Labels: map[string]string{"env": "demo"}})
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Stop()
	registryKube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	token, err := registryKube.CoreV1().Secrets(lf.Namespace).Get(ctx, "member-1-token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	fanoutDeploy := func(t *testing.T, args ...string) (code int, stdout, stderr string) {
		t.Helper()
		var out, errOut bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if exitErr, ok := err.(*exec.ExitError); ok {
			code = exitErr.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{out.String(), errOut.String()} {
			if strings.Contains(s, string(token.Data["token"])) {
				t.Fatal("a member's token appears in the output")
			}
		}
		t.Logf("fanout-deploy %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
		return code, out.String(), errOut.String()
	}
	// deployments reports each member's Deployment web as image/replicas, or "absent".
	deployments := func(t *testing.T, members ...*localfleet.Member) []string {
		t.Helper()
		var got []string
		for _, m := range members {
			d, err := kubernetes.NewForConfigOrDie(m.Config).AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			switch {
			case err == nil && d.ManagedFields[0].Manager == fieldManager:
				got = append(got, fmt.Sprintf("%s/%d", d.Spec.Template.Spec.Containers[0].Image, *d.Spec.Replicas))
			case err == nil:
				got = append(got, "not ours")
			default:
				got = append(got, "absent")
			}
		}
		return got
	}
	f := &endToEnd{ctx: ctx, bin: bin, lf: lf, registryKube: registryKube, fanoutDeploy: fanoutDeploy, deployments: deployments}
	t.Run("applies to every member", f.appliesToEveryMember)
	t.Run("without --replicas, a Deployment keeps its count", f.withoutReplicasADeploymentKeepsItsCount)
	t.Run("manifests from files, mapped on each member", f.manifestsFromFilesMappedOnEachMember)
	t.Run("--wait waits for each rollout", f.waitWaitsForEachRollout)
	t.Run("dry run changes nothing", f.dryRunChangesNothing)
	t.Run("a stopped member is reported and named", f.aStoppedMemberIsReportedAndNamed)
	t.Run("canaries", f.canaries)
	t.Run("members not Ready are skipped", f.membersNotReadyAreSkipped)
	t.Run("the members a placement chose, whoever wrote the decision", f.theMembersAPlacementChoseWhoeverWroteTheDecision)
	t.Run("delete", f.delete)
	t.Run("a member's errors do not drive the terminal", f.aMembersErrorsDoNotDriveTheTerminal)
	t.Run("an empty selection", f.anEmptySelection)
}

// endToEnd is what the subtests of TestEndToEnd share.
type endToEnd struct {
	ctx          context.Context
	bin          string
	lf           *localfleet.Fleet
	registryKube *kubernetes.Clientset
	fanoutDeploy func(*testing.T, ...string) (int, string, string)
	deployments  func(*testing.T, ...*localfleet.Member) []string
}

// appliesToEveryMember is the subtest "applies to every member" of TestEndToEnd.
func (f *endToEnd) appliesToEveryMember(t *testing.T) {
	lf, fanoutDeploy, deployments := f.lf, f.fanoutDeploy, f.deployments
	code, out, _ := fanoutDeploy(t, "-l", "env=demo", "--name", "web", "--image", "registry.example/web:1", "--replicas", "2")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := strings.Join(deployments(t, lf.Members...), " "); got != "registry.example/web:1/2 registry.example/web:1/2 registry.example/web:1/2" {
		t.Errorf("Deployments on the members: %s", got)
	}
	if progress := strings.Count(out, "] fleet/member-"); progress != 3 {
		t.Errorf("%d progress lines, want 3", progress)
	}
	for _, m := range lf.Members {
		if row := tableRow(out, "fleet/"+m.Name); !strings.Contains(row, m.URL()) || !strings.Contains(row, "applied, generation 1") {
			t.Errorf("table row for %s: %q", m.Name, row)
		}
	}
}

// withoutReplicasADeploymentKeepsItsCount is the subtest "without --replicas, a Deployment keeps its count" of TestEndToEnd.
func (f *endToEnd) withoutReplicasADeploymentKeepsItsCount(t *testing.T) {
	lf, fanoutDeploy, deployments := f.lf, f.fanoutDeploy, f.deployments
	// Before, the run applied replicas: 1, the flag's default, and so halved the fleet's web.
	code, _, _ := fanoutDeploy(t, "-l", "env=demo", "--name", "web", "--image", "registry.example/web:1")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := strings.Join(deployments(t, lf.Members...), " "); got != "registry.example/web:1/2 registry.example/web:1/2 registry.example/web:1/2" {
		t.Errorf("Deployments on the members: %s", got)
	}
}

// manifestsFromFilesMappedOnEachMember is the subtest "manifests from files, mapped on each member" of TestEndToEnd.
func (f *endToEnd) manifestsFromFilesMappedOnEachMember(t *testing.T) {
	ctx, lf, fanoutDeploy := f.ctx, f.lf, f.fanoutDeploy
	// member-1 alone serves Widgets: on the others, the Widget is their error, after the
	// objects before it in the files were applied there.
	installWidgetCRD(t, ctx, lf.Members[0])
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "1-app.yaml"), `apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {greeting: hello}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: fromfile, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: fromfile}}
  template:
    metadata: {labels: {app: fromfile}}
    spec: {containers: [{name: app, image: registry.example/fromfile:1}]}
`)
	writeFile(t, filepath.Join(dir, "2-widget.json"), `{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}}`)
	writeFile(t, filepath.Join(dir, "README.md"), "not a manifest")

	code, out, errOut := fanoutDeploy(t, "-l", "env=demo", "-f", dir, "--timeout", "10s")
	if code != 1 || !strings.Contains(out, "Applying 3 objects of "+dir+" on 3 members of fleet") {
		t.Fatalf("exit %d", code)
	}
	if row := tableRow(out, "fleet/member-1"); !strings.Contains(row, "configmap/app-config applied, deployment.apps/fromfile applied, widget.example.com/w applied") {
		t.Errorf("member-1: %q", row)
	}
	for _, m := range []string{"fleet/member-2", "fleet/member-3"} {
		if row := tableRow(out, m); !strings.Contains(row, "widget.example.com/w: this member does not serve Widget (example.com/v1) (") {
			t.Errorf("%s: %q", m, row)
		}
	}
	if !strings.Contains(out, "2-widget.json, document 1); done before it: configmap/app-config applied, deployment.apps/fromfile applied") {
		t.Errorf("the errors do not say what was applied before them:\n%s", out)
	}
	if !strings.Contains(errOut, "2 of 3 members failed: fleet/member-2, fleet/member-3") {
		t.Errorf("stderr: %q", errOut)
	}
	for _, m := range lf.Members {
		kube := kubernetes.NewForConfigOrDie(m.Config)
		if _, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "app-config", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: the ConfigMap, with no namespace of its own, is not in --member-namespace: %v", m.Name, err)
		}
		d, err := kube.AppsV1().Deployments("default").Get(ctx, "fromfile", metav1.GetOptions{})
		if err != nil || *d.Spec.Replicas != 3 || d.ManagedFields[0].Manager != fieldManager {
			t.Errorf("%s: Deployment fromfile: %v", m.Name, err)
		}
	}

	// A server dry run changes nothing; --delete removes what the files name, in reverse.
	writeFile(t, filepath.Join(dir, "1-app.yaml"), strings.Replace(readFile(t, filepath.Join(dir, "1-app.yaml")), "greeting: hello", "greeting: changed", 1))
	code, out, _ = fanoutDeploy(t, "-l", "env=demo", "-f", filepath.Join(dir, "1-app.yaml"), "--dry-run=server")
	if code != 0 || !strings.Contains(tableRow(out, "fleet/member-2"), "configmap/app-config would be applied, deployment.apps/fromfile would be applied") {
		t.Errorf("dry run: exit %d", code)
	}
	cm, err := kubernetes.NewForConfigOrDie(lf.Members[1].Config).CoreV1().ConfigMaps("default").Get(ctx, "app-config", metav1.GetOptions{})
	if err != nil || cm.Data["greeting"] != "hello" {
		t.Errorf("a dry run changed the ConfigMap: %v %v", cm.Data, err)
	}
	// --delete of the whole directory undoes the partial apply: a kind a member does not
	// serve is nothing to delete there, not an error that stops before the ConfigMap.
	code, out, errOut = fanoutDeploy(t, "-l", "env=demo", "-f", dir, "--delete")
	if code != 0 || !strings.Contains(tableRow(out, "fleet/member-1"), "widget.example.com/w deleted, deployment.apps/fromfile deleted, configmap/app-config deleted") {
		t.Errorf("delete: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, m := range []string{"fleet/member-2", "fleet/member-3"} {
		if row := tableRow(out, m); !strings.Contains(row, "widget.example.com/w not served here (nothing to delete), deployment.apps/fromfile deleted, configmap/app-config deleted") {
			t.Errorf("%s: %q", m, row)
		}
	}
	for _, m := range lf.Members {
		if _, err := kubernetes.NewForConfigOrDie(m.Config).CoreV1().ConfigMaps("default").Get(ctx, "app-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the ConfigMap is left after --delete: %v", m.Name, err)
		}
	}
}

// waitWaitsForEachRollout is the subtest "--wait waits for each rollout" of TestEndToEnd.
func (f *endToEnd) waitWaitsForEachRollout(t *testing.T) {
	ctx, bin, lf := f.ctx, f.bin, f.lf
	// No kube-controller-manager runs here: the test plays the Deployment controller on
	// member-1 and member-3, and member-2's rollout never completes.
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace,
		"--name", "rolled", "--image", "registry.example/rolled:1", "--replicas", "2", "--wait", "--timeout", "5s")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*localfleet.Member{lf.Members[0], lf.Members[2]} {
		deployments := kubernetes.NewForConfigOrDie(m.Config).AppsV1().Deployments("default")
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			d, err := deployments.Get(ctx, "rolled", metav1.GetOptions{})
			if err == nil {
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
				if _, err = deployments.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", m.Name, err)
			}
		}
	}
	err := cmd.Wait()
	if exitErr, ok := err.(*exec.ExitError); !ok || exitErr.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, out.String())
	}
	for _, name := range []string{"fleet/member-1", "fleet/member-3"} {
		if row := tableRow(out.String(), name); !strings.Contains(row, "applied, generation 1, rolled out (2 available)") {
			t.Errorf("%s: %q", name, row)
		}
	}
	if !strings.Contains(out.String(), "fleet/member-2: rollout of generation 1 not complete (observed generation 0; 0 of 2 replicas updated, 0 available)") {
		t.Errorf("member-2's error does not say how far the rollout got:\n%s", out.String())
	}
}

// dryRunChangesNothing is the subtest "dry run changes nothing" of TestEndToEnd.
func (f *endToEnd) dryRunChangesNothing(t *testing.T) {
	lf, fanoutDeploy, deployments := f.lf, f.fanoutDeploy, f.deployments
	code, out, _ := fanoutDeploy(t, "--name", "web", "--image", "registry.example/web:2", "--dry-run", "--prefer", "kubeconfig-secret,secret")
	if code != 0 || !strings.Contains(out, "server dry run") {
		t.Fatalf("exit %d", code)
	}
	if row := tableRow(out, "fleet/member-1"); !strings.Contains(row, "would be applied, generation") {
		t.Errorf("a dry run's row: %q", row)
	}
	if got := deployments(t, lf.Members...); got[0] != "registry.example/web:1/2" {
		t.Errorf("a dry run changed the Deployments: %v", got)
	}
}

// aStoppedMemberIsReportedAndNamed is the subtest "a stopped member is reported and named" of TestEndToEnd.
func (f *endToEnd) aStoppedMemberIsReportedAndNamed(t *testing.T) {
	lf, fanoutDeploy, deployments := f.lf, f.fanoutDeploy, f.deployments
	if err := lf.Member("member-2").Stop(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := fanoutDeploy(t, "--name", "web", "--image", "registry.example/web:3", "--timeout", "5s")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(out, "] fleet/member-2 FAILED (3 attempts, ") || strings.Count(out, " ok (1 attempt, ") != 2 {
		t.Errorf("progress lines do not show the outcomes")
	}
	if !strings.Contains(errOut, "1 of 3 members failed: fleet/member-2") {
		t.Errorf("stderr does not name the failed member: %q", errOut)
	}
	if row := tableRow(out, "fleet/member-2"); !strings.Contains(row, "connection refused") || !strings.Contains(row, "  3  ") {
		t.Errorf("failed member's row: %q", row)
	}
	// Below the table, the whole error, which the table's column may cut.
	if _, errors, ok := strings.Cut(out, "\nErrors:\n"); !ok || !strings.HasPrefix(errors, "  fleet/member-2: Get \"https://") || !strings.Contains(errors, "connection refused") {
		t.Errorf("no full error below the table:\n%s", out)
	}
	for _, name := range []string{"fleet/member-1", "fleet/member-3"} {
		if row := tableRow(out, name); !strings.Contains(row, "applied, generation 2") {
			t.Errorf("%s: %q", name, row)
		}
	}
	if got := deployments(t, lf.Members[0], lf.Members[2]); got[0] != "registry.example/web:3/2" || got[1] != got[0] {
		t.Errorf("the live members' Deployments: %v", got)
	}
}

// canaries is the subtest "canaries" of TestEndToEnd.
func (f *endToEnd) canaries(t *testing.T) {
	lf, fanoutDeploy, deployments := f.lf, f.fanoutDeploy, f.deployments
	// member-2, stopped, is the second canary: member-3 is not started, which is not a
	// failure (before, it was "FAILED (0 attempts)" and counted among the failed).
	code, out, errOut := fanoutDeploy(t, "--name", "web", "--image", "registry.example/web:4", "--timeout", "5s", "--canary", "2")
	if code != 1 || !strings.Contains(tableRow(out, "fleet/member-3"), "not started: 1 of 2 canary members failed") {
		t.Errorf("exit %d; member-3: %q", code, tableRow(out, "fleet/member-3"))
	}
	if !strings.Contains(out, "] fleet/member-3 not started\n") || strings.Contains(out, "0 attempts") {
		t.Errorf("member-3's progress line:\n%s", out)
	}
	if want := "fanout-deploy: 1 of 3 members failed: fleet/member-2; 1 not started (1 of 2 canary members failed): fleet/member-3\n"; errOut != want {
		t.Errorf("summary %q, want %q", errOut, want)
	}
	if _, errs, _ := strings.Cut(out, "\nErrors:\n"); strings.Contains(errs, "member-3") {
		t.Errorf("a member not started is listed among the errors:\n%s", errs)
	}
	if got := deployments(t, lf.Members[0], lf.Members[2]); got[0] != "registry.example/web:4/2" || got[1] != "registry.example/web:3/2" {
		t.Errorf("after a failed canary: %v", got)
	}
}

// membersNotReadyAreSkipped is the subtest "members not Ready are skipped" of TestEndToEnd.
func (f *endToEnd) membersNotReadyAreSkipped(t *testing.T) {
	ctx, lf, fanoutDeploy, deployments := f.ctx, f.lf, f.fanoutDeploy, f.deployments
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	c, err := clusters.Get(ctx, "member-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable})
	if _, err := clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, _ := fanoutDeploy(t, "--name", "web", "--image", "registry.example/web:5", "--timeout", "5s", "--skip-not-ready")
	if code != 0 || !strings.Contains(out, "] fleet/member-2 skipped (not Ready)") || !strings.Contains(out, "Skipped, not Ready (--skip-not-ready): fleet/member-2") {
		t.Errorf("exit %d", code)
	}
	if got := deployments(t, lf.Members[0], lf.Members[2]); got[0] != "registry.example/web:5/2" || got[1] != got[0] {
		t.Errorf("the Ready members' Deployments: %v", got)
	}
}

// theMembersAPlacementChoseWhoeverWroteTheDecision is the subtest "the members a placement chose, whoever wrote the decision" of TestEndToEnd.
func (f *endToEnd) theMembersAPlacementChoseWhoeverWroteTheDecision(t *testing.T) {
	ctx, lf, fanoutDeploy := f.ctx, f.lf, f.fanoutDeploy
	// Another scheduler's decision, written with cluster-inventory-api's own types: two
	// slices, the second-indexed first, as a consumer may list them.
	if err := fleettest.InstallPlacementDecisionCRD(ctx, lf.Registry.Config); err != nil {
		t.Fatal(err)
	}
	pds := cpversioned.NewForConfigOrDie(lf.Registry.Config).ApisV1alpha1().PlacementDecisions(lf.Namespace)
	slice := func(name, key, index string, refs ...cpv1alpha1.ClusterProfileReference) {
		t.Helper()
		pd := &cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{cpv1alpha1.DecisionKeyLabel: key, cpv1alpha1.DecisionIndexLabel: index}}, SchedulerName: "someone-else"}
		for _, r := range refs {
			pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{ClusterProfileRef: r, Reason: "their reason"})
		}
		if _, err := pds.Create(ctx, pd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slice("placed-1", "placed", "1", cpv1alpha1.ClusterProfileReference{Name: "member-1"})
	slice("placed-0", "placed", "0", cpv1alpha1.ClusterProfileReference{Name: "member-3", Namespace: lf.Namespace})
	code, out, _ := fanoutDeploy(t, "--placement", "placed", "--name", "placed", "--image", "registry.example/placed:1", "--canary", "1")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "on 2 members of "+lf.Namespace+" (placement placed)") || !strings.Contains(out, "[1/2] fleet/member-3 ok") {
		t.Errorf("not the decision's members in its order (member-3, the canary, first):\n%s", out)
	}
	placed := func(m *localfleet.Member) bool {
		_, err := kubernetes.NewForConfigOrDie(m.Config).AppsV1().Deployments("default").Get(ctx, "placed", metav1.GetOptions{})
		return err == nil
	}
	if !placed(lf.Members[0]) || placed(lf.Members[1]) || !placed(lf.Members[2]) {
		t.Errorf("placed on member-1, -2, -3: %v %v %v, want true false true", placed(lf.Members[0]), placed(lf.Members[1]), placed(lf.Members[2]))
	}

	// A decision of this cluster set that names another set's ClusterProfile is not followed
	// at all: whoever may write decisions here may not send our workloads there.
	slice("elsewhere-0", "elsewhere", "0", cpv1alpha1.ClusterProfileReference{Name: "member-2"},
		cpv1alpha1.ClusterProfileReference{Name: "member-1", Namespace: "another-set"})
	code, _, errOut := fanoutDeploy(t, "--placement", "elsewhere", "--name", "elsewhere", "--image", "registry.example/x:1")
	if code != 1 || !strings.Contains(errOut, "names ClusterProfiles outside namespace "+lf.Namespace) || !strings.Contains(errOut, "refusing to follow it") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if got := deploymentsNamed(t, ctx, "elsewhere", lf.Members...); got != 0 {
		t.Errorf("a refused decision deployed to %d members", got)
	}
	// No decision of that key: an error, never an empty fleet taken for a decision.
	code, _, errOut = fanoutDeploy(t, "--placement", "nope", "--name", "x", "--image", "x")
	if code != 1 || !strings.Contains(errOut, "no PlacementDecision has this decision key") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := fanoutDeploy(t, "--placement", "placed", "--name", "placed", "--delete"); code != 0 {
		t.Errorf("deleting: exit %d", code)
	}
}

// delete is the subtest "delete" of TestEndToEnd.
func (f *endToEnd) delete(t *testing.T) {
	lf, fanoutDeploy, deployments := f.lf, f.fanoutDeploy, f.deployments
	code, out, _ := fanoutDeploy(t, "--name", "web", "--delete", "--selector", "env=demo", "--timeout", "5s")
	if code != 1 || !strings.Contains(tableRow(out, "fleet/member-1"), "deleted") {
		t.Errorf("exit %d", code)
	}
	if got := deployments(t, lf.Members[0], lf.Members[2]); got[0] != "absent" || got[1] != "absent" {
		t.Errorf("after --delete: %v", got)
	}
}

// aMembersErrorsDoNotDriveTheTerminal is the subtest "a member's errors do not drive the terminal" of TestEndToEnd.
func (f *endToEnd) aMembersErrorsDoNotDriveTheTerminal(t *testing.T) {
	ctx, lf, registryKube, fanoutDeploy := f.ctx, f.lf, f.registryKube, f.fanoutDeploy
	// Whoever answers at a member's address writes its errors: here, escape sequences that
	// would clear the screen and set the clipboard.
	hostile := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500,"message":"\u001b[2J\u001b]52;c;ZXZpbA==\u0007\rall fine"}`)
	}))
	defer hostile.Close()
	_, err := registryKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hostile"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hostile.Certificate().Raw})
	fleettest.RegisterServer(t, lf, "hostile", "evil", hostile.URL, caPEM, "evil-token")
	code, out, errOut := fanoutDeploy(t, "-n", "hostile", "--name", "web", "--image", "x", "--timeout", "5s")
	if code != 1 || !strings.Contains(out, "hostile/evil") {
		t.Fatalf("exit %d", code)
	}
	if strings.ContainsAny(out+errOut, "\x1b\r") || !strings.Contains(out, "^[[2J^[]52;c;ZXZpbA==") {
		t.Errorf("control characters reach the terminal: %q", out+errOut)
	}
}

// anEmptySelection is the subtest "an empty selection" of TestEndToEnd.
func (f *endToEnd) anEmptySelection(t *testing.T) {
	fanoutDeploy := f.fanoutDeploy
	code, out, errOut := fanoutDeploy(t, "--name", "web", "--image", "x", "--selector", "env=nowhere")
	if code != 1 || out != "" || !strings.Contains(errOut, `no clusters in namespace fleet match --selector "env=nowhere"`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// installWidgetCRD makes the member serve example.com/v1 Widgets, and waits until it does.
func installWidgetCRD(t *testing.T, ctx context.Context, m *localfleet.Member) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if _, err := apiextensionsclient.NewForConfigOrDie(m.Config).ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	discovery := kubernetes.NewForConfigOrDie(m.Config).Discovery()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := discovery.ServerResourcesForGroupVersion("example.com/v1"); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("Widgets not served: %v", err)
		}
	}
}

// tableRow is the line of the results table that starts with member.
func tableRow(out, member string) string {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, member+" ") {
			return line
		}
	}
	return ""
}

// deploymentsNamed counts the members with a Deployment of that name in namespace default.
func deploymentsNamed(t *testing.T, ctx context.Context, name string, members ...*localfleet.Member) int {
	t.Helper()
	n := 0
	for _, m := range members {
		if _, err := kubernetes.NewForConfigOrDie(m.Config).AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
			n++
		}
	}
	return n
}

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "fanout-deploy ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
