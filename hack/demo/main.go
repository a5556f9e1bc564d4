package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

func main() {
	keep := flag.Bool("keep", false, "keep the fleet running at the end until interrupted, and print how to reach it")
	fanoutDeploy := flag.String("fanout-deploy", "bin/fanout-deploy", "the built examples/fanout-deploy")
	fleetAPI := flag.String("fleet-api", "bin/fleet-api", "the built examples/fleet-api")
	clusterregistry := flag.String("clusterregistry", "bin/clusterregistry", "the built cmd/clusterregistry")
	flag.StringVar(&screenshotPath, "screenshot", "", "save fleet-api's dashboard, once the chart release is delivered, to this PNG (headless Chromium): README's docs/images/fleet-api.png")
	flag.Parse()

	logf.SetLogger(logr.Discard()) // envtest logs through controller-runtime's logger
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *fanoutDeploy, *fleetAPI, *clusterregistry, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, fanoutDeploy, fleetAPI, clusterregistry string, keep bool) error {
	start := time.Now()
	step("Starting a local fleet: a registry and 3 member clusters, each a real kube-apiserver with etcd;\n" +
		"   the members run kube-controller-manager, kube-scheduler and KWOK with 2 simulated Nodes each")
	lf, err := localfleet.Start(ctx, localfleet.Options{Members: 3, Labels: map[string]string{"env": "demo"}, Workloads: &localfleet.Workloads{Nodes: 2}})
	if err != nil {
		return err
	}
	// Stop on every way out, an interrupt included, so no server or temporary file is left.
	defer func() {
		step("Stopping every API server and etcd, and removing their files")
		if err := lf.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping:", err)
		}
	}()
	fmt.Printf("registry at %s; members:\n", lf.Registry.URL())
	for _, m := range lf.Members {
		how := "a service-account token in a Secret pinned to its server"
		if m.ProviderType == v1alpha1.ProviderTypeKubeconfigSecret {
			how = "a kubeconfig Secret"
		}
		fmt.Printf("  %s at %s, reached through %s (provider type %s)\n", m.Name, m.URL(), how, m.ProviderType)
	}
	fmt.Printf("(started in %s)\n", time.Since(start).Round(100*time.Millisecond))

	// Both commands reach the registry, and only the registry, through $KUBECONFIG.
	sh := func(name, path string, args ...string) error {
		fmt.Printf("\n$ %s %s\n", name, strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+lf.Registry.Kubeconfig)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	kubectl := func(args ...string) error { return sh("kubectl", lf.Kubectl, args...) }
	deploy := func(args ...string) error { return sh("fanout-deploy", fanoutDeploy, args...) }

	// The scheduler writes SIG Multicluster's PlacementDecisions, whose CRD a registry installs
	// from cluster-inventory-api (here from the module this one requires, as the go command
	// keeps it).
	inventory, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-inventory-api").Output()
	if err != nil {
		return fmt.Errorf("finding the cluster-inventory-api module: %w", err)
	}
	step("The registry's ClusterRoles (clusterregistry-view and -edit, aggregated into view, edit and admin),\n" +
		"   as an operator installs them; the CRD localfleet installed is already current")
	if err := sh("clusterregistry", clusterregistry, "install"); err != nil {
		return err
	}
	step("SIG Multicluster's CRDs: PlacementDecisions, where placement decisions go, and ClusterProfiles,\n" +
		"   which the clusterprofiles controller publishes (docs/library.md)")
	crds := filepath.Join(strings.TrimSpace(string(inventory)), "config", "crd", "bases")
	if err := kubectl("apply", "--server-side", "-f", filepath.Join(crds, "multicluster.x-k8s.io_placementdecisions.yaml"),
		"-f", filepath.Join(crds, "multicluster.x-k8s.io_clusterprofiles.yaml")); err != nil {
		return err
	}
	if err := kubectl("wait", "--for", "condition=Established", "crd/placementdecisions.multicluster.x-k8s.io",
		"crd/clusterprofiles.multicluster.x-k8s.io", "--timeout", "60s"); err != nil {
		return err
	}
	step("The controllers: health probes every member and writes what it sees into each Cluster's status;\n" +
		"   placements decides each Placement and writes its decision as PlacementDecisions;\n" +
		"   releases delivers each Release to the members of its decision, and keeps it there")
	health := exec.CommandContext(ctx, clusterregistry, "controllers", "-n", lf.Namespace, "--controllers", "health,placements,releases",
		"--interval", "1s", "--failure-threshold", "2", "--success-threshold", "1")
	health.Env = append(os.Environ(), "KUBECONFIG="+lf.Registry.Kubeconfig)
	health.Stdout, health.Stderr = os.Stdout, os.Stdout
	health.Cancel = func() error { return health.Process.Signal(os.Interrupt) }
	fmt.Printf("$ clusterregistry %s &\n", strings.Join(health.Args[1:], " "))
	if err := health.Start(); err != nil {
		return err
	}
	defer func() { _ = health.Process.Signal(os.Interrupt); _ = health.Wait() }()
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	// waitReady waits until the controller has written Ready with the reason for the member.
	waitReady := func(name, reason string) error {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			c, err := clusters.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if r := c.Status.Condition(v1alpha1.ConditionReady); r != nil && r.Reason == reason && c.Status.ClusterID != "" {
				return nil
			}
		}
		return fmt.Errorf("%s: the health controller did not report %s within a minute", name, reason)
	}
	for _, m := range lf.Members {
		if err := waitReady(m.Name, v1alpha1.ReasonReachable); err != nil {
			return err
		}
	}

	step("The registry: one Cluster per member, with pointers to credentials, never the credentials")
	if err := kubectl("get", "clusters", "-n", lf.Namespace, "-o", "wide"); err != nil {
		return err
	}

	step("A Placement chooses where hello runs: the demo members that are Ready, keeping one that\n" +
		"   becomes Unreachable for 5 minutes, so that a flap does not move the workload")
	placementFile, err := writeTemp("hello-placement-*.yaml", placementYAML)
	if err != nil {
		return err
	}
	defer os.Remove(placementFile)
	fmt.Print(placementYAML)
	if err := kubectl("apply", "-n", lf.Namespace, "-f", placementFile); err != nil {
		return err
	}
	if err := waitPlaced(ctx, lf, "hello", len(lf.Members)); err != nil {
		return err
	}
	cr := func(args ...string) error { return sh("clusterregistry", clusterregistry, args...) }
	if err := cr("get", "placements", "-n", lf.Namespace, "-o", "wide"); err != nil {
		return err
	}
	if err := cr("explain-placement", "hello", "-n", lf.Namespace); err != nil {
		return err
	}

	step("fanout-deploy applies a Deployment to the members the placement chose, at once")
	if err := deploy("-n", lf.Namespace, "--placement", "hello", "--name", "hello", "--image", "registry.example/hello:1", "--replicas", "2"); err != nil {
		return fmt.Errorf("fanout-deploy: %w", err)
	}
	fmt.Printf("\n$ kubectl --kubeconfig <member-1's admin kubeconfig> get deployments\n")
	cmd := exec.CommandContext(ctx, lf.Kubectl, "--kubeconfig", lf.Members[0].Kubeconfig, "get", "deployments", "-n", "default")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}

	step("A Release delivers an app to the members the placement chose, and keeps it there: server-side\n" +
		"   apply, health from a watch of what it applied, waves by the placement's rollout groups")
	releaseFile, err := writeTemp("web-release-*.yaml", releaseYAML("blue"))
	if err != nil {
		return err
	}
	defer os.Remove(releaseFile)
	fmt.Print(releaseYAML("blue"))
	if err := kubectl("apply", "-n", lf.Namespace, "-f", releaseFile); err != nil {
		return err
	}
	if err := waitRelease(ctx, lf, "web", func(r *v1alpha1.Release) bool { return r.Status.Ready == int32(len(lf.Members)) }); err != nil {
		return err
	}
	if err := cr("get", "releases", "-n", lf.Namespace, "-o", "wide"); err != nil {
		return err
	}
	if err := cr("describe", "release", "web", "-n", lf.Namespace); err != nil {
		return err
	}
	memberKubectl := func(m *localfleet.Member, args ...string) error {
		fmt.Printf("\n$ kubectl --kubeconfig <%s's admin kubeconfig> %s\n", m.Name, strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, lf.Kubectl, append([]string{"--kubeconfig", m.Kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	step("Someone edits the app on member-1 by hand; the releases controller sees it from its watch and puts it back")
	if err := memberKubectl(lf.Members[0], "patch", "configmap", "web-config", "-n", "default", "--type", "merge", "-p", `{"data":{"color":"red"}}`); err != nil {
		return err
	}
	time.Sleep(time.Second)
	if err := memberKubectl(lf.Members[0], "get", "configmap", "web-config", "-n", "default", "-o", "jsonpath={.data.color}{\"\\n\"}"); err != nil {
		return err
	}

	if err := rollouts(ctx, lf, demoShell{kubectl: kubectl, clusterregistry: cr, member: memberKubectl}); err != nil {
		return err
	}

	step("fleet-api answers what runs where from watch caches on every member (package fleetcache)")
	api, err := startFleetAPI(ctx, fleetAPI, lf)
	if err != nil {
		return err
	}
	defer api.stop()
	if err := api.show(ctx, "", "Synced"); err != nil {
		return err
	}
	if err := api.stream(ctx, len(lf.Members)); err != nil {
		return err
	}

	step("A Helm chart, released through fleet-api's /charts (the seeds' Optikon route) as an editor of\n" +
		"   the set: rendered once per distinct member value, applied to the placement's members")
	if err := api.releaseChart(ctx, lf); err != nil {
		return err
	}
	if err := memberKubectl(lf.Members[0], "get", "configmap", "greeter-greeting", "-n", "default", "-o", "jsonpath={.data}{\"\\n\"}"); err != nil {
		return err
	}
	if screenshotPath != "" {
		if err := api.screenshot(ctx, screenshotPath); err != nil {
			return err
		}
	}

	step("Stopping member-2's API server, as an outage would; the health controller sees it")
	if err := lf.Member("member-2").StopAPIServer(); err != nil {
		return err
	}
	if err := waitReady("member-2", v1alpha1.ReasonUnreachable); err != nil {
		return err
	}
	if err := kubectl("get", "clusters", "-n", lf.Namespace, "-o", "wide"); err != nil {
		return err
	}
	fmt.Println("\nThe placement keeps member-2 within its toleration: its decision does not change.")
	if err := cr("explain-placement", "hello", "-n", lf.Namespace); err != nil {
		return err
	}
	fmt.Println("\nfleet-api shows member-2's caches as stale since the outage, with what they held then:")
	if err := api.show(ctx, "member-2", "Stale"); err != nil {
		return err
	}

	step("fanout-deploy again: the other members are updated, member-2 is reported and named")
	err = deploy("-n", lf.Namespace, "--placement", "hello", "--name", "hello", "--image", "registry.example/hello:2", "--timeout", "10s")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		return fmt.Errorf("fanout-deploy with a member down: %v, want exit status 1", err)
	}
	fmt.Println("(exit status 1, as expected)")

	step("A new revision of the Release rolls out in waves, one rollout group after the other; member-2,\n" +
		"   unreachable, costs the rollout one failure (maxFailures: 1) and keeps the revision it had")
	if err := os.WriteFile(releaseFile, []byte(releaseYAML("green")), 0o600); err != nil {
		return err
	}
	if err := kubectl("apply", "-n", lf.Namespace, "-f", releaseFile); err != nil {
		return err
	}
	if err := waitRelease(ctx, lf, "web", func(r *v1alpha1.Release) bool {
		return r.Status.ObservedGeneration == r.Generation && r.Status.Ready == int32(len(lf.Members)-1) && r.Status.Wave == r.Status.Waves
	}); err != nil {
		return err
	}
	if err := cr("describe", "release", "web", "-n", lf.Namespace); err != nil {
		return err
	}

	step("member-2 comes back; the health controller marks it Ready again")
	if err := lf.Member("member-2").StartAPIServer(); err != nil {
		return err
	}
	if err := waitReady("member-2", v1alpha1.ReasonReachable); err != nil {
		return err
	}
	if err := kubectl("get", "clusters", "-n", lf.Namespace, "-o", "wide"); err != nil {
		return err
	}
	if err := kubectl("describe", "cluster", "member-2", "-n", lf.Namespace); err != nil {
		return err
	}
	fmt.Println("\nfleet-api follows member-2 again, with the same caches:")
	if err := api.show(ctx, "member-2", "Synced"); err != nil {
		return err
	}
	fmt.Println("\nThe Release reaches member-2 again: every member runs the new revision.")
	if err := waitRelease(ctx, lf, "web", func(r *v1alpha1.Release) bool { return r.Status.Ready == int32(len(lf.Members)) }); err != nil {
		return err
	}
	if err := cr("get", "releases", "-n", lf.Namespace, "-o", "wide"); err != nil {
		return err
	}

	step("member-3 leaves the placement (excluded); the Release's objects are removed from it")
	if err := kubectl("patch", "placement", "hello", "-n", lf.Namespace, "--type", "merge", "-p", `{"spec":{"exclude":["member-3"]}}`); err != nil {
		return err
	}
	if err := waitRelease(ctx, lf, "web", func(r *v1alpha1.Release) bool {
		return r.Status.Members == int32(len(lf.Members)-1) && len(r.Status.Worst) == 0
	}); err != nil {
		return err
	}
	if err := memberKubectl(lf.Members[2], "get", "configmaps,services", "-n", "default", "-l", v1alpha1.ReleaseLabel+"=web"); err != nil {
		return err
	}

	if keep {
		kubeconfig, err := fleetKubeconfig(lf)
		if err != nil {
			return err
		}
		defer os.Remove(kubeconfig)
		abs := func(p string) string {
			if a, err := filepath.Abs(p); err == nil {
				return a
			}
			return p
		}
		step("The fleet is up. In another shell:")
		fmt.Printf("  export KUBECONFIG=%s   # contexts: registry (current), %s\n", kubeconfig, memberNames(lf))
		fmt.Printf("  %s get clusters -n %s\n", lf.Kubectl, lf.Namespace)
		fmt.Printf("  %s --context member-1 get deployments\n", lf.Kubectl)
		fmt.Printf("  %s get -n %s\n", abs(clusterregistry), lf.Namespace)
		fmt.Printf("  %s get placements -n %s\n", abs(clusterregistry), lf.Namespace)
		fmt.Printf("  %s describe release web -n %s\n", abs(clusterregistry), lf.Namespace)
		fmt.Printf("  %s -n %s --placement hello --name hello --image nginx\n", abs(fanoutDeploy), lf.Namespace)
		fmt.Printf("  curl -H \"Authorization: Bearer $(%s create token %s -n %s)\" %s/clusters   # fleet-api acts for its caller\n",
			lf.Kubectl, viewerAccount, lf.Namespace, api.url)
		fmt.Println("Press Ctrl-C to stop.")
		<-ctx.Done()
	}
	fmt.Printf("\n(demo took %s)\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// screenshotPath is -screenshot: where to save the dashboard, or "".
var screenshotPath string

func step(msg string) { fmt.Printf("\n== %s\n", msg) }

// placementYAML is the demo's Placement: every Ready demo member, a member that becomes
// Unreachable kept for five minutes.
const placementYAML = `apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Placement
metadata:
  name: hello
spec:
  selector: {matchLabels: {env: demo}}
  tolerations: [{reason: Unreachable, seconds: 300}]
  rolloutGroupSize: 1
`

// releaseYAML is the demo's Release, its ConfigMap's color as given: delivered to the hello
// placement's members, one rollout group after the other, a member that fails allowed.
func releaseYAML(color string) string {
	return `apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Release
metadata:
  name: web
spec:
  placement: {name: hello}
  rollout: {strategy: Groups, soakSeconds: 2, maxFailures: 1}
  source:
    manifests:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: web-config}, data: {color: ` + color + `}}
    - apiVersion: v1
      kind: Service
      metadata: {name: web}
      spec: {ports: [{port: 80}], selector: {app: web}}
`
}

// waitRelease waits until the Release name's status satisfies ok.
func waitRelease(ctx context.Context, lf *localfleet.Fleet, name string, ok func(*v1alpha1.Release) bool) error {
	releases := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Releases(lf.Namespace)
	var r *v1alpha1.Release
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var err error
		if r, err = releases.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if ok(r) {
			return nil
		}
	}
	return fmt.Errorf("release %s: not as expected within a minute; status: %+v", name, r.Status)
}

func writeTemp(pattern, content string) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

// waitPlaced waits until the Placement name has chosen want members.
func waitPlaced(ctx context.Context, lf *localfleet.Fleet, name string, want int) error {
	placements := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Placements(lf.Namespace)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		p, err := placements.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.ObservedGeneration == p.Generation && int(p.Status.Chosen) == want {
			return nil
		}
	}
	return fmt.Errorf("placement %s: no decision of %d members within a minute", name, want)
}

// fleetKubeconfig writes a kubeconfig with a context for the registry (the current one) and one
// per member, each named after it, with its administrator's credentials.
func fleetKubeconfig(lf *localfleet.Fleet) (string, error) {
	merged := clientcmdapi.NewConfig()
	add := func(name, path string) error {
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			return err
		}
		c := cfg.Contexts[cfg.CurrentContext]
		merged.Clusters[name], merged.AuthInfos[name] = cfg.Clusters[c.Cluster], cfg.AuthInfos[c.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		return nil
	}
	if err := add("registry", lf.Registry.Kubeconfig); err != nil {
		return "", err
	}
	for _, m := range lf.Members {
		if err := add(m.Name, m.Kubeconfig); err != nil {
			return "", err
		}
	}
	merged.CurrentContext = "registry"
	f, err := os.CreateTemp("", "demo-fleet-*.kubeconfig")
	if err != nil {
		return "", err
	}
	f.Close()
	return f.Name(), clientcmd.WriteToFile(*merged, f.Name())
}

func memberNames(lf *localfleet.Fleet) string {
	var names []string
	for _, m := range lf.Members {
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}
