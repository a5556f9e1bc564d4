package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterregistryv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

// demo is one run of the demo: its fleet, the commands it built, and how it runs them. Its
// methods are the demo's parts, in the order run calls them.
type demo struct {
	ctx                           context.Context
	lf                            *localfleet.Fleet
	fanoutDeploy, clusterregistry string
	clusters                      clusterregistryv1alpha1.ClusterInterface
	// trust are the readers' flags for the tunnel to the edge member, once it is joined.
	trust []string
	// before are the uids of what the Releases delivered to member-2, before its outage.
	before string
}

// startFleet starts the registry and three members, and says how each is reached.
func startFleet(ctx context.Context) (*localfleet.Fleet, error) {
	step("Starting a local fleet: a registry and 3 member clusters, each a real kube-apiserver with etcd;\n" +
		"   the members run kube-controller-manager, kube-scheduler and KWOK with 2 simulated Nodes each")
	lf, err := localfleet.Start(ctx, localfleet.Options{Members: 3, Labels: map[string]string{"env": "demo"}, Workloads: &localfleet.Workloads{Nodes: 2},
		Isolated: []string{edgeMember}})
	if err != nil {
		return nil, err
	}
	fmt.Printf("registry at %s; members:\n", lf.Registry.URL())
	for _, m := range lf.Members {
		if m.Isolated() {
			fmt.Printf("  %s at %s, in a network of its own: joined through the tunnel below\n", m.Name, m.URL())
			continue
		}
		how := "a service-account token in a Secret pinned to its server"
		if m.ProviderType == v1alpha1.ProviderTypeKubeconfigSecret {
			how = "a kubeconfig Secret"
		}
		fmt.Printf("  %s at %s, reached through %s (provider type %s)\n", m.Name, m.URL(), how, m.ProviderType)
	}
	return lf, nil
}

// sh runs a command, printed first. Commands reach the registry, and only the registry, through
// $KUBECONFIG.
func (d *demo) sh(name, path string, args ...string) error {
	fmt.Printf("\n$ %s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(d.ctx, path, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.lf.Registry.Kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func (d *demo) kubectl(args ...string) error { return d.sh("kubectl", d.lf.Kubectl, args...) }
func (d *demo) deploy(args ...string) error {
	return d.sh("fanout-deploy", d.fanoutDeploy, append(args, d.trust...)...)
}
func (d *demo) cr(args ...string) error { return d.sh("clusterregistry", d.clusterregistry, args...) }

// member runs kubectl against a member, as its administrator.
func (d *demo) member(m *localfleet.Member, args ...string) error {
	fmt.Printf("\n$ kubectl --kubeconfig <%s's admin kubeconfig> %s\n", m.Name, strings.Join(args, " "))
	cmd := m.Command(d.ctx, d.lf.Kubectl, append([]string{"--kubeconfig", m.Kubeconfig}, args...)...) // in its network
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// waitReady waits until the health controller has written Ready with the reason for the member.
func (d *demo) waitReady(name, reason string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		c, err := d.clusters.Get(d.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r := c.Status.Condition(v1alpha1.ConditionReady); r != nil && r.Reason == reason && c.Status.ClusterID != "" {
			return nil
		}
	}
	return fmt.Errorf("%s: the health controller did not report %s within a minute", name, reason)
}

// setUp installs the registry's ClusterRoles and SIG Multicluster's CRDs, and starts the
// controllers; it returns once every member is Ready, with how to stop them.
func (d *demo) setUp() (stop func(), err error) {
	// The scheduler writes SIG Multicluster's PlacementDecisions, whose CRD a registry installs
	// from cluster-inventory-api (here from the module this one requires, as the go command
	// keeps it).
	inventory, err := exec.CommandContext(d.ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-inventory-api").Output()
	if err != nil {
		return nil, fmt.Errorf("finding the cluster-inventory-api module: %w", err)
	}
	step("The registry's ClusterRoles (clusterregistry-view and -edit, aggregated into view, edit and admin),\n" +
		"   as an operator installs them; the CRD localfleet installed is already current")
	if err := d.cr("install"); err != nil {
		return nil, err
	}
	step("SIG Multicluster's CRDs: PlacementDecisions, where placement decisions go, and ClusterProfiles,\n" +
		"   which the clusterprofiles controller publishes (docs/library.md)")
	crds := filepath.Join(strings.TrimSpace(string(inventory)), "config", "crd", "bases")
	if err := d.kubectl("apply", "--server-side", "-f", filepath.Join(crds, "multicluster.x-k8s.io_placementdecisions.yaml"),
		"-f", filepath.Join(crds, "multicluster.x-k8s.io_clusterprofiles.yaml")); err != nil {
		return nil, err
	}
	if err := d.kubectl("wait", "--for", "condition=Established", "crd/placementdecisions.multicluster.x-k8s.io",
		"crd/clusterprofiles.multicluster.x-k8s.io", "--timeout", "60s"); err != nil {
		return nil, err
	}
	stop, err = d.startControllers()
	if err != nil {
		return nil, err
	}
	for _, m := range d.lf.Members {
		if err := d.waitReady(m.Name, v1alpha1.ReasonReachable); err != nil {
			stop()
			return nil, err
		}
	}
	step("The registry: one Cluster per member, with pointers to credentials, never the credentials")
	if err := d.kubectl("get", "clusters", "-n", d.lf.Namespace, "-o", "wide"); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// startControllers starts `clusterregistry controllers` in the background.
func (d *demo) startControllers() (stop func(), err error) {
	step("The controllers: health probes every member and writes what it sees into each Cluster's status;\n" +
		"   placements decides each Placement and writes its decision as PlacementDecisions;\n" +
		"   releases delivers each Release to the members of its decision, and keeps it there;\n" +
		"   capacity writes what each member's Nodes hold, and what its Pods ask of them")
	cmd := exec.CommandContext(d.ctx, d.clusterregistry, append([]string{"controllers", "-n", d.lf.Namespace, "--controllers", "health,placements,releases,capacity",
		"--interval", "1s", "--failure-threshold", "2", "--success-threshold", "1"}, d.trust...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.lf.Registry.Kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	fmt.Printf("$ clusterregistry %s &\n", strings.Join(cmd.Args[1:], " "))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }, nil
}

// place applies the hello Placement, explains its decision, and fans a Deployment out to the
// members it chose.
func (d *demo) place() error {
	step("A Placement chooses where hello runs: the demo members that are Ready, keeping one that\n" +
		"   becomes Unreachable for 5 minutes, so that a flap does not move the workload")
	placementFile, err := writeTemp("hello-placement-*.yaml", placementYAML)
	if err != nil {
		return err
	}
	defer os.Remove(placementFile)
	fmt.Print(placementYAML)
	ns := d.lf.Namespace
	if err := d.kubectl("apply", "-n", ns, "-f", placementFile); err != nil {
		return err
	}
	if err := waitPlaced(d.ctx, d.lf, "hello", len(d.lf.Members)); err != nil {
		return err
	}
	if err := d.cr("get", "placements", "-n", ns, "-o", "wide"); err != nil {
		return err
	}
	if err := d.cr("explain-placement", "hello", "-n", ns); err != nil {
		return err
	}
	step("fanout-deploy applies a Deployment to the members the placement chose, at once")
	if err := d.deploy("-n", ns, "--placement", "hello", "--name", "hello", "--image", "registry.example/hello:1", "--replicas", "2"); err != nil {
		return fmt.Errorf("fanout-deploy: %w", err)
	}
	return d.member(d.lf.Members[0], "get", "deployments", "-n", "default")
}

// release applies the web Release, shows it delivered, and shows a hand edit on a member put back.
// It returns the Release's file, which newRevision rewrites; the caller removes it.
func (d *demo) release() (string, error) {
	step("A Release delivers an app to the members the placement chose, and keeps it there: server-side\n" +
		"   apply, health from a watch of what it applied, waves by the placement's rollout groups")
	releaseFile, err := writeTemp("web-release-*.yaml", releaseYAML("blue"))
	if err != nil {
		return "", err
	}
	fmt.Print(releaseYAML("blue"))
	ns := d.lf.Namespace
	if err := d.kubectl("apply", "-n", ns, "-f", releaseFile); err != nil {
		return releaseFile, err
	}
	if err := waitRelease(d.ctx, d.lf, "web", func(r *v1alpha1.Release) bool { return r.Status.Ready == int32(len(d.lf.Members)) }); err != nil {
		return releaseFile, err
	}
	if err := d.cr("get", "releases", "-n", ns, "-o", "wide"); err != nil {
		return releaseFile, err
	}
	if err := d.cr("describe", "release", "web", "-n", ns); err != nil {
		return releaseFile, err
	}
	step("Someone edits the app on member-1 by hand; the releases controller sees it from its watch and puts it back")
	if err := d.member(d.lf.Members[0], "patch", "configmap", "web-config", "-n", "default", "--type", "merge", "-p", `{"data":{"color":"red"}}`); err != nil {
		return releaseFile, err
	}
	time.Sleep(time.Second)
	return releaseFile, d.member(d.lf.Members[0], "get", "configmap", "web-config", "-n", "default", "-o", "jsonpath={.data.color}{\"\\n\"}")
}

// charts shows fleet-api's view and stream, then releases a chart through its /charts.
func (d *demo) charts(api *fleetAPI) error {
	if err := api.show(d.ctx, "", "Synced"); err != nil {
		return err
	}
	if err := api.stream(d.ctx, len(d.lf.Members)); err != nil {
		return err
	}
	step("A Helm chart, released through fleet-api's /charts (the seeds' Optikon route) as an editor of\n" +
		"   the set: rendered once per distinct member value, applied to the placement's members")
	if err := api.releaseChart(d.ctx, d.lf); err != nil {
		return err
	}
	if err := d.member(d.lf.Members[0], "get", "configmap", "greeter-greeting", "-n", "default", "-o", "jsonpath={.data}{\"\\n\"}"); err != nil {
		return err
	}
	step("Optikon's own API (/v0, its swagger) on the same server: the Clusters its UI lists, and a\n" +
		"   chart uploaded as its UI uploads one, installed by Helm on every member labelled env=demo")
	if err := api.optikon(d.ctx, d.lf); err != nil {
		return err
	}
	if screenshotPath != "" {
		return api.screenshot(d.ctx, screenshotPath)
	}
	return nil
}

// outage stops member-2's API server, and shows the health controller, the placement, fleet-api
// and fanout-deploy each seeing it.
func (d *demo) outage(api *fleetAPI) error {
	step("Stopping member-2's API server, as an outage would; the health controller sees it")
	ns := d.lf.Namespace
	var err error
	if d.before, err = d.deliveredUIDs("member-2"); err != nil {
		return err
	}
	fmt.Printf("What the Releases delivered to member-2, before the outage:\n%s", d.before)
	if err := d.lf.Member("member-2").StopAPIServer(); err != nil {
		return err
	}
	if err := d.waitReady("member-2", v1alpha1.ReasonUnreachable); err != nil {
		return err
	}
	if err := d.kubectl("get", "clusters", "-n", ns, "-o", "wide"); err != nil {
		return err
	}
	fmt.Println("\nThe spread placement tolerates nothing: member-2 leaves it, and its share of cart goes to the others\n" +
		"(6 by 3 and 1: 5 and 1), while member-2 keeps its copy at 2 (Departed) until it is replaced and its grace is over.")
	if err := d.showShares(map[string]int32{"member-1": 5, "member-2": 2, "member-3": 1}); err != nil {
		return err
	}
	fmt.Println("\nThe hello placement keeps member-2 within its toleration: its decision does not change.")
	if err := d.cr("explain-placement", "hello", "-n", ns); err != nil {
		return err
	}
	fmt.Println("\nfleet-api shows member-2's caches as stale since the outage, with what they held then:")
	if err := api.show(d.ctx, "member-2", "Stale"); err != nil {
		return err
	}
	step("fanout-deploy again: the other members are updated, member-2 is reported and named")
	err = d.deploy("-n", ns, "--placement", "hello", "--name", "hello", "--image", "registry.example/hello:2", "--timeout", "10s")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		return fmt.Errorf("fanout-deploy with a member down: %v, want exit status 1", err)
	}
	fmt.Println("(exit status 1, as expected)")
	return nil
}

// newRevision rolls a new revision of the web Release out in waves, member-2 still down.
func (d *demo) newRevision(releaseFile string) error {
	step("A new revision of the Release rolls out in waves, one rollout group after the other; member-2,\n" +
		"   unreachable, costs the rollout one failure (maxFailures: 1) and keeps the revision it had")
	if err := os.WriteFile(releaseFile, []byte(releaseYAML("green")), 0o600); err != nil {
		return err
	}
	if err := d.kubectl("apply", "-n", d.lf.Namespace, "-f", releaseFile); err != nil {
		return err
	}
	if err := waitRelease(d.ctx, d.lf, "web", func(r *v1alpha1.Release) bool {
		return r.Status.ObservedGeneration == r.Generation && r.Status.Ready == int32(len(d.lf.Members)-1) && r.Status.Wave == r.Status.Waves
	}); err != nil {
		return err
	}
	return d.cr("describe", "release", "web", "-n", d.lf.Namespace)
}

// recovery brings member-2 back, and shows it Ready, followed by fleet-api, and given the
// Release's new revision.
func (d *demo) recovery(api *fleetAPI) error {
	step("member-2 comes back; the health controller marks it Ready again")
	ns := d.lf.Namespace
	if err := d.lf.Member("member-2").StartAPIServer(); err != nil {
		return err
	}
	if err := d.waitReady("member-2", v1alpha1.ReasonReachable); err != nil {
		return err
	}
	if err := d.kubectl("get", "clusters", "-n", ns, "-o", "wide"); err != nil {
		return err
	}
	if err := d.kubectl("describe", "cluster", "member-2", "-n", ns); err != nil {
		return err
	}
	fmt.Println("\nmember-2 is back in the spread placement, and the shares are 3/2/1 again:")
	if err := d.showShares(map[string]int32{"member-1": 3, "member-2": 2, "member-3": 1}); err != nil {
		return err
	}
	fmt.Println("\nfleet-api follows member-2 again, with the same caches:")
	if err := api.show(d.ctx, "member-2", "Synced"); err != nil {
		return err
	}
	fmt.Println("\nThe Release reaches member-2 again: every member runs the new revision.")
	if err := waitRelease(d.ctx, d.lf, "web", func(r *v1alpha1.Release) bool { return r.Status.Ready == int32(len(d.lf.Members)) }); err != nil {
		return err
	}
	after, err := d.deliveredUIDs("member-2")
	if err != nil {
		return err
	}
	fmt.Printf("\nWhat the Releases delivered to member-2, after it: the same objects (an outage deletes nothing)\n%s", after)
	for line := range strings.Lines(d.before) {
		if !strings.Contains(after, line) {
			return fmt.Errorf("member-2's delivered object %q was deleted or made again across its outage:\nbefore:\n%safter:\n%s", strings.TrimSpace(line), d.before, after)
		}
	}
	return d.cr("get", "releases", "-n", ns, "-o", "wide")
}

// exclude takes member-3 out of the placement, and shows the Release's objects leave it.
func (d *demo) exclude(*fleetAPI) error {
	step("member-3 leaves the placement (excluded); the Release's objects are removed from it")
	if err := d.kubectl("patch", "placement", "hello", "-n", d.lf.Namespace, "--type", "merge", "-p", `{"spec":{"exclude":["member-3"]}}`); err != nil {
		return err
	}
	if err := waitRelease(d.ctx, d.lf, "web", func(r *v1alpha1.Release) bool {
		return r.Status.Members == int32(len(d.lf.Members)-1) && len(r.Status.Worst) == 0
	}); err != nil {
		return err
	}
	return d.member(d.lf.Members[2], "get", "configmaps,services", "-n", "default", "-l", v1alpha1.ReleaseLabel+"=web")
}

// keep prints how to reach the fleet, and waits for an interrupt.
func (d *demo) keep(api *fleetAPI) error {
	lf := d.lf
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
	fmt.Printf("  %s get -n %s\n", abs(d.clusterregistry), lf.Namespace)
	fmt.Printf("  %s get placements -n %s\n", abs(d.clusterregistry), lf.Namespace)
	fmt.Printf("  %s describe release web -n %s\n", abs(d.clusterregistry), lf.Namespace)
	fmt.Printf("  %s -n %s --placement hello --name hello --image nginx\n", abs(d.fanoutDeploy), lf.Namespace)
	fmt.Printf("  curl -H \"Authorization: Bearer $(%s create token %s -n %s)\" %s/clusters   # fleet-api acts for its caller\n",
		lf.Kubectl, viewerAccount, lf.Namespace, api.url)
	fmt.Println("Press Ctrl-C to stop.")
	<-d.ctx.Done()
	return nil
}

// deliveredUIDs lists what the Releases delivered to a member, with each object's uid, a line
// each, in a stable order.
func (d *demo) deliveredUIDs(member string) (string, error) {
	m := d.lf.Member(member)
	cmd := m.Command(d.ctx, d.lf.Kubectl, "--kubeconfig", m.Kubeconfig, "get", "configmaps,services,deployments", "-A",
		"-l", v1alpha1.ReleaseLabel, "--sort-by", "{.metadata.name}", "-o", "custom-columns=KIND:.kind,NAMESPACE:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid", "--no-headers")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("listing what the Releases delivered to %s: %w", member, err)
	}
	return string(out), nil
}
