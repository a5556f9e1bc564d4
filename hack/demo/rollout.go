package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

// shopYAML is the demo's Release of a Deployment, which the members' own controllers run: image,
// in the hello placement's rollout groups, a wave done once its member's Deployment has been
// Available for 2 s, a member failed when its Pods are not Ready within 10 s, no failure allowed.
func shopYAML(image string) string {
	return `apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Release
metadata:
  name: shop
spec:
  placement: {name: hello}
  rollout: {strategy: Groups, soakSeconds: 2, progressDeadlineSeconds: 10}
  source:
    manifests:
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: shop}
      spec:
        replicas: 2
        selector: {matchLabels: {app: shop}}
        template:
          metadata: {labels: {app: shop}}
          spec: {containers: [{name: shop, image: ` + image + `}]}
`
}

// demoShell runs the demo's commands: kubectl against the registry, clusterregistry, and kubectl
// against a member.
type demoShell struct {
	kubectl, clusterregistry func(args ...string) error
	member                   func(m *localfleet.Member, args ...string) error
}

// rollouts shows a Deployment rolled out by the members' own controllers: a first release, a
// new image in waves, and a bad image that stops at its first wave.
func rollouts(ctx context.Context, lf *localfleet.Fleet, sh demoShell) error {
	step("A Release of a Deployment: the members' own controllers run it (kube-controller-manager,\n" +
		"   kube-scheduler, KWOK's simulated Nodes), one rollout group after the other")
	if err := applyShop(sh, lf.Namespace, "registry.example/shop:1"); err != nil {
		return err
	}
	first, err := waitShop(ctx, lf, "", func(r *v1alpha1.Release) bool { return r.Status.Ready == int32(len(lf.Members)) })
	if err != nil {
		return err
	}
	if err := sh.clusterregistry("get", "releases", "shop", "-n", lf.Namespace, "-o", "wide"); err != nil {
		return err
	}
	if err := sh.member(lf.Members[0], "get", "pods", "-l", "app=shop", "-n", "default", "-o", "wide"); err != nil {
		return err
	}

	step("A new image rolls out in waves: a wave starts once the last one's Deployments have been\n" +
		"   Available, as their Deployment controllers say, for the soak")
	changed := time.Now()
	if err := applyShop(sh, lf.Namespace, "registry.example/shop:2"); err != nil {
		return err
	}
	second, err := waitShop(ctx, lf, first, func(r *v1alpha1.Release) bool { return r.Status.Ready == int32(len(lf.Members)) })
	if err != nil {
		return err
	}
	fmt.Printf("every member Available at revision %s %s after the change (%d waves, a soak of 2 s each)\n",
		second, time.Since(changed).Round(100*time.Millisecond), len(lf.Members))

	step("A bad image stops at its first wave: its Pods wait in ImagePullBackOff, its member fails at\n" +
		"   the progress deadline (10 s), and the other members keep running the image they have")
	if err := applyShop(sh, lf.Namespace, localfleet.UnpullableRegistry+"/shop:3"); err != nil {
		return err
	}
	failed := ""
	if _, err := waitShop(ctx, lf, second, func(r *v1alpha1.Release) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		if len(r.Status.Worst) > 0 {
			failed = r.Status.Worst[0].Cluster
		}
		return c != nil && c.Status == "True" && c.Reason == "TooManyFailures"
	}); err != nil {
		return err
	}
	if err := sh.clusterregistry("describe", "release", "shop", "-n", lf.Namespace); err != nil {
		return err
	}
	// The failed member's old Pods keep serving beside the bad image's, which wait.
	return sh.member(lf.Member(failed), "get", "pods", "-l", "app=shop", "-n", "default")
}

// applyShop applies the shop Release of image to cluster set ns with kubectl.
func applyShop(sh demoShell, ns, image string) error {
	file, err := writeTemp("shop-release-*.yaml", shopYAML(image))
	if err != nil {
		return err
	}
	defer os.Remove(file)
	fmt.Printf("(the shop Release, its image %s)\n", image)
	return sh.kubectl("apply", "-n", ns, "-f", file)
}

// waitShop waits until the shop Release is past revision not and ok, and returns its revision.
func waitShop(ctx context.Context, lf *localfleet.Fleet, not string, ok func(*v1alpha1.Release) bool) (string, error) {
	var revision string
	err := waitRelease(ctx, lf, "shop", func(r *v1alpha1.Release) bool {
		revision = r.Status.Revision
		return r.Status.ObservedGeneration == r.Generation && r.Status.Revision != not && ok(r)
	})
	return revision, err
}
