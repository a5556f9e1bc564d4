package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

func TestMain(m *testing.M) {
	flag.Parse()
	initLogging()                    // before anything logs; see logging.go
	discard := io.Writer(io.Discard) // what envtest and the servers log, until a command's run
	logOutput.Store(&discard)
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// shared is the package's local fleet of two members, started by the first test that asks for it
// (sharedFleet) and stopped after the last. A test that changes it works in a cluster set of its
// own (fleettest.CopySet); one that needs a registry of a particular shape starts its own.
var shared = fleettest.Shared{Options: localfleet.Options{Members: 2}}

func sharedFleet(t *testing.T) *localfleet.Fleet {
	t.Helper()
	realservers.Required(t)
	return shared.Fleet(t)
}

// sharedSet is the shared fleet seen through a new cluster set of the test's own, holding copies
// of the named members' Clusters (none when none is named); it must not be stopped.
func sharedSet(t *testing.T, members ...string) *localfleet.Fleet {
	t.Helper()
	sharedFleet(t)
	return shared.Set(t, members...)
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"health", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"health", "stray"}, `unknown command "stray"`},
		{[]string{"foo"}, `unknown command "foo"`},
		{[]string{"version", "extra"}, `unknown command "extra"`},
		{[]string{"version", "-o", "wide"}, "--output=wide: want json or yaml"},
		{[]string{"export", "extra-arg"}, `unknown command "extra-arg"`},
		{[]string{"export", "-l", "!!!"}, "-l/--selector:"},
		{[]string{"install", "extra"}, `unknown command "extra"`},
		{[]string{"import"}, "the file to import"},
		{[]string{"unjoin"}, "accepts 1 arg(s)"},
		{[]string{"get", "-o", "table"}, "-o table: want one of"},
		{[]string{"get", "-l", "!!!"}, "-l/--selector:"},
		{[]string{"get", "prod", "-A"}, "names and -A conflict"},
		{[]string{"describe", "x", "-A"}, "names and -A conflict"},
		{[]string{"get", "placements", "web", "-A"}, "names and -A conflict"},
		{[]string{"get", "placements", "-l", "!!!"}, "-l/--selector:"},
		{[]string{"get", "placements", "-o", "table"}, "-o table: want one of"},
		{[]string{"explain-placement"}, "name a Placement, or give a policy file with -f/--filename"},
		{[]string{"explain-placement", "web", "-f", "web.yaml"}, "a Placement NAME and -f/--filename conflict"},
		{[]string{"explain-placement", "web", "-A"}, "a Placement NAME and -A conflict"},
		{[]string{"explain-placement", "web", "other"}, "accepts at most 1 arg(s)"},
		{[]string{"controllers", "--controllers", "scheduler"}, `--controllers: "scheduler": want health, rotation, clusterprofiles, placements, releases or capacity`},
		{[]string{"controllers", "--chart-hosts", "charts.example.com"}, "--chart-hosts, --chart-ca-file and --chart-plain-http are for the releases controller"},
		{[]string{"controllers", "--controllers", "releases", "--chart-ca-file", "/nonexistent/ca.pem"}, "--chart-ca-file: open /nonexistent/ca.pem"},
		{[]string{"health", "-l", "a in ("}, "-l/--selector: unable to parse"},
		{[]string{"health", "-A", "--leader-elect"}, "--leader-elect with -A needs --leader-elect-namespace"},
		{[]string{"health", "--prefer", "magic"}, `--prefer: unknown provider type "magic"`},
		{[]string{"health", "--failure-threshold", "-1"}, "--failure-threshold -1: want 1 or more"},
		{[]string{"health", "--failure-threshold", "0"}, "--failure-threshold 0: want 1 or more"},
		{[]string{"health", "--interval", "-1s"}, "--interval -1s: want a positive duration"},
		{[]string{"health", "--interval", "0"}, "--interval 0s: want a positive duration"},
		{[]string{"health", "--probe-timeout", "0"}, "--probe-timeout 0s: want a positive duration"},
		{[]string{"health", "--concurrency", "0"}, "--concurrency 0: want 1 or more"},
		{[]string{"rotate", "--member-timeout", "0"}, "--member-timeout 0s: want a positive duration"},
		{[]string{"rotate", "--once", "--leader-elect"}, "--once and --leader-elect conflict"},
		{[]string{"install", "-o", "json"}, "-o applies only to --dry-run=client"},
		{[]string{"install", "--dry-run=server"}, "--dry-run=server: install cannot ask the server"},
		{[]string{"export", "--allow-exec", "aws"}, "--allow-exec applies only to --format kubeconfig"},
		{[]string{"export", "--allow-exec-args", "aws eks get-token"}, "--allow-exec-args applies only to --format kubeconfig"},
		{[]string{"health", "--allow-exec", "aws eks get-token"}, "a command with arguments goes in --allow-exec-args"},
		{[]string{"credential", "dev", "--allow-exec-args", `aws "eks`}, "--allow-exec-args \"aws \\\"eks\": a double quote is not closed"},
		{[]string{"import", "fleet.yaml", "--drop-credential-args"}, "--drop-credential-args goes with --from-kubeconfig"},
		{[]string{"export", "--format", "table"}, `--format "table": want clusters or kubeconfig`},
		{[]string{"join", "dev", "--exec", "--token-ttl", "1h"}, "--token-ttl and --exec conflict"},
		{[]string{"join", "dev", "--dry-run=server"}, "--dry-run=server: want client or none"},
		{[]string{"join", "dev", "--drop-credential-args"}, "--drop-credential-args goes with --exec"},
		{[]string{"join", "dev", "--token-ttl", "0s"}, "--token-ttl 0s: want a positive duration"},
		{[]string{"join", "dev", "--token-ttl", "1m"}, "--token-ttl 1m0s: a member's API server gives no token for less than 10m0s"},
		{[]string{"unjoin", "dev", "--dry-run=server"}, "--dry-run=server: want client or none"},
		{[]string{"unjoin", "dev", "--registry-only", "--member-context", "dev"}, "--registry-only and --member-context conflict"},
		{[]string{"import", "fleet.yaml", "--dry-run=client"}, "--dry-run=client: want server or none"},
		{[]string{"join"}, "the kubeconfig context of the cluster to join"},
		{[]string{"credential"}, "the name of the Cluster"},
		{[]string{"credential", "dev", "--prefer", "magic"}, `--prefer: unknown provider type "magic"`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		require.Equal(t, 2, code, "%q: %s", tc.args, stderr.String())
		require.Contains(t, stderr.String(), tc.want, "%q", tc.args)
	}
}

// The command, built and run as a user would, against a local fleet: it writes what it sees, and
// an interrupt ends it with status 0.
func TestHealthCommand(t *testing.T) {
	realservers.Required(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := commandBinary(t)

	lf, err := localfleet.Start(ctx, localfleet.Options{Members: 1})
	require.NoError(t, err)
	defer lf.Stop()
	require.NoError(t, fleettest.InstallClusterProfileCRD(ctx, lf.Registry.Config))
	var logs syncBuffer
	cmd := exec.CommandContext(ctx, bin, "health", "--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace,
		"--interval", "300ms", "--failure-threshold", "1", "--success-threshold", "1", "--cluster-profiles", "--rotate-credentials")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		require.NoError(t, cmd.Wait(), "exit status after an interrupt; logs:\n%s", logs.String())
	}()

	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	require.NoError(t, lf.Members[0].StopAPIServer())
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		c, err := clusters.Get(ctx, "member-1", metav1.GetOptions{})
		require.NoError(t, err)
		if cond := c.Status.Condition(v1alpha1.ConditionReady); cond != nil && cond.Reason == v1alpha1.ReasonUnreachable {
			break
		}
		require.True(t, time.Now().Before(deadline), "member-1 not marked Unreachable; logs:\n%s", logs.String())
	}
	// describe tells the story: the condition, and the Event the controller wrote about it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace, "describe", "member-1"}, &stdout, &stderr), stderr.String())
		out := stdout.String()
		if regexp.MustCompile(`(?m)^  Warning\s+Unreachable\s+`).MatchString(out) {
			require.Regexp(t, `(?m)^Name:\s+member-1$`, out)
			require.Regexp(t, `(?m)^  Ready\s+False\s+Unreachable\s+since `, out)
			require.Regexp(t, `(?m)^  p?\S+\s+(secret|kubeconfig-secret)\s+name=`, out)
			break
		}
		require.True(t, time.Now().Before(deadline), "describe shows no Unreachable event:\n%s", out)
	}
	// --cluster-profiles: the member's ClusterProfile says so too.
	profiles := cpversioned.NewForConfigOrDie(lf.Registry.Config).ApisV1alpha1().ClusterProfiles(lf.Namespace)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		p, err := profiles.Get(ctx, "member-1", metav1.GetOptions{})
		if err == nil && len(p.Status.Conditions) == 1 && p.Status.Conditions[0].Reason == v1alpha1.ReasonUnreachable {
			require.Equal(t, cpv1alpha1.ClusterConditionControlPlaneHealthy, p.Status.Conditions[0].Type)
			require.Equal(t, metav1.ConditionFalse, p.Status.Conditions[0].Status)
			require.Equal(t, lf.Members[0].URL(), p.Status.AccessProviders[0].Cluster.Server)
			break
		}
		require.True(t, time.Now().Before(deadline), "no ClusterProfile of member-1 that says Unreachable (%v); logs:\n%s", err, logs.String())
	}
	require.NoError(t, lf.Members[0].StartAPIServer())
	// It says at start what it watches and how, and every line has a time.
	require.Contains(t, logs.String(), `"msg"="starting"`)
	require.Contains(t, logs.String(), `"namespaces"=["`+lf.Namespace+`"]`)
	require.Contains(t, logs.String(), `"interval"="300ms"`)
	require.NotContains(t, logs.String(), "could not renew", "the rotator failed on a token it does not renew")
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		require.Regexp(t, `"ts"="\d{4}-\d\d-\d\d `, line)
	}
}

// syncBuffer is a bytes.Buffer that a command's output and the test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// install --dry-run=client prints what it would apply, reaching no server: the CRD, the two
// ClusterRoles and the cluster set's namespace.
func TestInstallDryRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"install", "--dry-run", "--create-namespace", "-n", "fleet", "-o", "json", "--server", "https://127.0.0.1:1"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	var list struct {
		Kind  string
		Items []struct {
			Kind     string
			Metadata struct{ Name string }
		}
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &list))
	require.Equal(t, "List", list.Kind)
	var got []string
	for _, item := range list.Items {
		got = append(got, item.Kind+"/"+item.Metadata.Name)
	}
	require.Equal(t, []string{"CustomResourceDefinition/clusters.clusterregistry.k8s.io", "CustomResourceDefinition/placements.clusterregistry.k8s.io",
		"CustomResourceDefinition/releases.clusterregistry.k8s.io", "CustomResourceDefinition/releasestatusslices.clusterregistry.k8s.io",
		"ClusterRole/clusterregistry-view", "ClusterRole/clusterregistry-edit", "Namespace/fleet"}, got)
}

// Every subcommand says what it does and shows how, as kubectl's do.
func TestEverySubcommandHasHelpWithExamples(t *testing.T) {
	root := newRoot(context.Background())
	require.NotEmpty(t, root.Commands())
	for _, cmd := range root.Commands() {
		if cmd.Name() == "help" || cmd.Name() == "completion" {
			continue
		}
		require.NotEmpty(t, cmd.Short, "%s: no short description", cmd.Name())
		require.NotEmpty(t, cmd.Long, "%s: no description", cmd.Name())
		require.Contains(t, cmd.Example, "clusterregistry "+cmd.Name(), "%s: no example that runs it", cmd.Name())
	}
}

// commandLine runs the command in-process against a registry's kubeconfig and namespace, and
// returns its exit status, standard output and standard error.
func commandLine(ctx context.Context, kubeconfig, namespace string) func(args ...string) (int, string, string) {
	return func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"--kubeconfig", kubeconfig, "-n", namespace}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
}

// version says which build this is, on one line or as an object.
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"version"}, &stdout, &stderr), stderr.String())
	require.Regexp(t, `^clusterregistry \S+ \(.+, go1\.\d+.*, \w+/\w+\)\n$`, stdout.String())
	stdout.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"version", "-o", "json"}, &stdout, &stderr), stderr.String())
	var info map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &info))
	require.Equal(t, runtime.Version(), info["goVersion"])
	require.NotEmpty(t, info["version"])
}
