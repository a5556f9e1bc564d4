package clusterregistry_test

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// samplesDir holds the YAML samples; go test runs in the package directory.
var samplesDir = filepath.Join("..", "examples", "clusters")

// kubectl runs the kubectl built beside the test server and returns its combined output.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(testContext(t), lf.Kubectl, append([]string{"--kubeconfig", lf.Registry.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// applySamples applies every sample to a new namespace and returns it.
func applySamples(t *testing.T) string {
	t.Helper()
	ns := newNamespace(t)
	out := mustKubectl(t, "apply", "-n", ns, "-f", samplesDir)
	if n := strings.Count(out, " created"); n != 5 {
		t.Fatalf("applying the samples created %d objects, want 5:\n%s", n, out)
	}
	return ns
}

func TestKubectlGetShowsColumns(t *testing.T) {
	ns := applySamples(t)

	// A controller reports status; the Ready and Version columns show it.
	clusters := registryClient(t).ClusterregistryV1alpha1().Clusters(ns)
	c, err := clusters.Get(testContext(t), "prod-eu-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Version = "v1.36.3"
	expires := metav1.NewTime(time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC))
	c.Status.CredentialsExpireAt = &expires
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReachable})
	if _, err := clusters.UpdateStatus(testContext(t), c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	out := mustKubectl(t, "get", "clusters", "-n", ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME DISPLAY NAME SERVER READY VERSION AGE" {
		t.Errorf("header %q", lines[0])
	}
	if len(lines) != 6 {
		t.Fatalf("want a header and 5 rows:\n%s", out)
	}
	row := regexp.MustCompile(`(?m)^prod-eu-1\s+Production EU 1\s+10\.20\.0\.10:6443\s+True\s+v1\.36\.3\s+\S+$`)
	if !row.MatchString(out) {
		t.Errorf("no row for prod-eu-1 with its display name, first server, readiness and version:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^dev-eu-1\s+Development EU 1\s+dev-eu-1\.example\.com\s+\S+$`).MatchString(out) {
		t.Errorf("an unprobed cluster should show empty Ready and Version:\n%s", out)
	}
	// -o wide adds the reason, the last report, when the credentials expire and what the
	// member's Nodes hold (status.resources, which the capacity controller writes).
	wide := mustKubectl(t, "get", "clusters", "-n", ns, "-o", "wide")
	for _, column := range []string{"CREDENTIALS EXPIRE", "NODES", "CPU REQUESTED", "CPU ALLOCATABLE"} {
		if !strings.Contains(strings.Split(wide, "\n")[0], column) {
			t.Errorf("-o wide has no %s column:\n%s", column, wide)
		}
	}
	if !regexp.MustCompile(`(?m)^prod-eu-1\s.*\s2026-11-25T06:00:00Z(\s|$)`).MatchString(wide) {
		t.Errorf("-o wide does not show prod-eu-1's credentials' expiry:\n%s", wide)
	}
}

func TestKubectlSelectorsShortNameAndCategory(t *testing.T) {
	ns := applySamples(t)
	names := func(out string) string {
		return strings.Join(strings.Fields(out), " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "clusters", "-l", "env=prod"}, "edge-3 prod-eu-1 prod-us-1"},
		{[]string{"get", "clusters", "-l", "env=prod,region=eu"}, "prod-eu-1"},
		{[]string{"get", "clusters", "-l", "region in (ap,us)"}, "prod-us-1 staging-ap-1"},
		{[]string{"get", "rcl", "-l", "env!=prod"}, "dev-eu-1 staging-ap-1"},
		{[]string{"get", "clusterregistry"}, "cluster.clusterregistry.k8s.io/dev-eu-1 cluster.clusterregistry.k8s.io/edge-3 " +
			"cluster.clusterregistry.k8s.io/prod-eu-1 cluster.clusterregistry.k8s.io/prod-us-1 cluster.clusterregistry.k8s.io/staging-ap-1"},
	} {
		args := append(tc.args, "-n", ns, "-o", "name", "--sort-by", ".metadata.name")
		got := names(mustKubectl(t, args...))
		if tc.args[1] != "clusterregistry" {
			got = strings.ReplaceAll(got, "cluster.clusterregistry.k8s.io/", "")
		}
		if got != tc.want {
			t.Errorf("kubectl %s: got %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

func TestKubectlWatchStreamsChanges(t *testing.T) {
	ns := applySamples(t)
	ctx, cancel := context.WithTimeout(testContext(t), testTimeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, lf.Kubectl, "--kubeconfig", lf.Registry.Kubeconfig, "get", "clusters", "-n", ns, "-w")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()

	lines := make(chan string)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	waitFor := func(what string, match func(string) bool) {
		t.Helper()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl get -w ended before %s; stderr: %s", what, stderr.String())
				}
				if match(line) {
					return
				}
			case <-time.After(testTimeout):
				t.Fatalf("kubectl get -w showed no %s", what)
			}
		}
	}
	waitFor("initial listing", func(l string) bool { return strings.HasPrefix(l, "staging-ap-1 ") })

	patch := []byte(`{"spec":{"displayName":"Edge renamed while watched"}}`)
	if _, err := registryClient(t).ClusterregistryV1alpha1().Clusters(ns).Patch(ctx, "edge-3", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("change", func(l string) bool { return strings.Contains(l, "Edge renamed while watched") })

	if err := registryClient(t).ClusterregistryV1alpha1().Clusters(ns).Delete(ctx, "dev-eu-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// kubectl prints the deleted object's last state once more.
	waitFor("deletion", func(l string) bool { return strings.HasPrefix(l, "dev-eu-1 ") })
}

func TestKubectlExplainShowsDocs(t *testing.T) {
	for path, want := range map[string][]string{
		"cluster.spec": {
			"spec describes the member cluster: how to reach its API server",
			"displayName", "user-friendly name",
			"kubernetesApiEndpoints", "authInfo",
		},
		"cluster.spec.kubernetesApiEndpoints.serverEndpoints": {
			"longest prefix",
			"clientCIDR", "serverAddress", "-required-",
		},
		"cluster.spec.authInfo.providers.config": {"never the credentials"},
		"cluster.status":                         {"conditions", "lastProbeTime", "version"},
	} {
		out := mustKubectl(t, "explain", path)
		flat := strings.Join(strings.Fields(out), " ")
		for _, w := range want {
			if !strings.Contains(flat, w) {
				t.Errorf("kubectl explain %s lacks %q:\n%s", path, w, out)
			}
		}
	}
}

// kubectl apply of a Cluster holding an inline credential is refused: the message names the field
// and does not repeat the credential.
func TestKubectlRejectsInlineCredentials(t *testing.T) {
	ns := newNamespace(t)
	manifest := `apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Cluster
metadata:
  name: leaky
spec:
  kubernetesApiEndpoints:
    serverEndpoints:
    - clientCIDR: 0.0.0.0/0
      serverAddress: https://admin:` + plantedSecret + `@leaky.example.com
  authInfo:
    providers:
    - name: p
      type: {name: secret}
      config: {name: leaky, token: ` + plantedSecret + `}
`
	cmd := exec.CommandContext(testContext(t), lf.Kubectl, "--kubeconfig", lf.Registry.Kubeconfig, "apply", "-n", ns, "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("kubectl apply accepted inline credentials:\n%s", out)
	}
	for _, field := range []string{"spec.authInfo.providers[0].config", "spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress"} {
		if !strings.Contains(string(out), field) {
			t.Errorf("kubectl output does not name %s:\n%s", field, out)
		}
	}
	if strings.Contains(string(out), plantedSecret) {
		t.Errorf("kubectl output repeats the credential:\n%s", out)
	}
}
