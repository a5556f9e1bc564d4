package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
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
	fleetAPI := flag.String("fleet-api", "bin/fleet-api", "the built cmd/fleet-api")
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

func run(ctx context.Context, fanoutDeploy, fleetAPIPath, clusterregistry string, keep bool) error {
	start := time.Now()
	lf, err := startFleet(ctx)
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
	fmt.Printf("(started in %s)\n", time.Since(start).Round(100*time.Millisecond))
	d := &demo{ctx: ctx, lf: lf, fanoutDeploy: fanoutDeploy, clusterregistry: clusterregistry,
		clusters: versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)}
	edge, err := d.joinEdge()
	if err != nil {
		return err
	}
	defer edge.stop()
	stopControllers, err := d.setUp()
	if err != nil {
		return err
	}
	defer stopControllers()
	if err := d.place(); err != nil {
		return err
	}
	releaseFile, err := d.release()
	if releaseFile != "" {
		defer os.Remove(releaseFile)
	}
	if err != nil {
		return err
	}
	if err := rollouts(ctx, lf, demoShell{kubectl: d.kubectl, clusterregistry: d.cr, member: d.member}); err != nil {
		return err
	}
	if err := d.capacity(); err != nil {
		return err
	}
	step("fleet-api answers what runs where from watch caches on every member (package fleetcache)")
	api, err := startFleetAPI(ctx, fleetAPIPath, lf, d.trust)
	if err != nil {
		return err
	}
	defer api.stop()
	for _, part := range []func(*fleetAPI) error{d.charts, d.outage, func(api *fleetAPI) error { return d.newRevision(releaseFile) }, d.recovery, d.exclude} {
		if err := part(api); err != nil {
			return err
		}
	}
	if keep {
		if err := d.keep(api); err != nil {
			return err
		}
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
// per member that this network reaches, each named after it, with its administrator's
// credentials.
func fleetKubeconfig(lf *localfleet.Fleet) (string, error) {
	merged := clientcmdapi.NewConfig()
	if err := addContext(merged, "registry", lf.Registry.Kubeconfig); err != nil {
		return "", err
	}
	for _, m := range lf.Members {
		if m.Isolated() {
			continue // nothing here dials it: kubectl reaches it through tunnel-proxy
		}
		if err := addContext(merged, m.Name, m.Kubeconfig); err != nil {
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
		if m.Isolated() {
			continue
		}
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}
