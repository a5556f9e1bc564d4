package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

// The demo's capacity part: each member's capacity in its Cluster's status, a Placement that
// prefers the member with room, and a Release whose 6 replicas are divided 3/2/1 by weight; the
// outage moves member-2's share to the others, and the recovery brings it back.

// fillerPod is a Pod that asks for cpu of a member's Nodes, so that the members differ in room.
func fillerPod(cpu string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: filler, namespace: default}
spec:
  containers: [{name: filler, image: registry.example/filler:1, resources: {requests: {cpu: "` + cpu + `"}}}]
`
}

// roomyPlacementYAML chooses the one demo member with the most cpu free.
const roomyPlacementYAML = `apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Placement
metadata:
  name: roomy
spec:
  selector: {matchLabels: {env: demo}}
  count: 1
  fit: {perNode: {cpu: "2"}}
  prefer: [{cel: 'cluster.resources.free["cpu"]'}]
`

// cartYAML is a Placement of every Ready demo member (an Unreachable one not tolerated: it
// leaves at once) and a Release of 6 replicas of cart divided 3/2/1 across them.
const cartYAML = `apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Placement
metadata:
  name: spread
spec:
  selector: {matchLabels: {env: demo}}
  tolerations: [{reason: Unreachable, seconds: 0}]
---
apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Release
metadata:
  name: cart
spec:
  placement: {name: spread}
  divide:
  - name: cart
    group: apps
    kind: Deployment
    objectName: cart
    replicas: 6
    weights: [{cluster: member-1, weight: 3}, {cluster: member-2, weight: 2}, {cluster: member-3, weight: 1}]
  source:
    manifests:
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: cart}
      spec:
        selector: {matchLabels: {app: cart}}
        template:
          metadata: {labels: {app: cart}}
          spec: {containers: [{name: cart, image: registry.example/cart:1, resources: {requests: {cpu: 100m}}}]}
`

// capacity shows the members' capacity, a Placement preferring room, and the cart Release
// divided across the members.
func (d *demo) capacity() error {
	step("The capacity controller writes what each member's Nodes hold, and what is asked of them, into\n" +
		"   its Cluster's status; a Pod that asks for 8 cpu on member-1 and one for 4 on member-3 leave member-2 the most room")
	for member, cpu := range map[string]string{"member-1": "8", "member-3": "4"} {
		if err := d.applyOn(d.lf.Member(member), fillerPod(cpu)); err != nil {
			return err
		}
	}
	if err := d.waitRequested(map[string]string{"member-1": "8", "member-3": "4"}); err != nil {
		return err
	}
	ns := d.lf.Namespace
	if err := d.kubectl("get", "clusters", "-n", ns, "-o", "wide"); err != nil {
		return err
	}
	step("A Placement of one member that fits a 2-cpu Pod on a Node, preferring the most cpu free: member-2")
	fmt.Print(roomyPlacementYAML)
	if err := d.applyRegistry("roomy-placement-*.yaml", roomyPlacementYAML); err != nil {
		return err
	}
	if err := waitPlaced(d.ctx, d.lf, "roomy", 1); err != nil {
		return err
	}
	if err := d.cr("explain-placement", "roomy", "-n", ns); err != nil {
		return err
	}
	step("Its status keeps the scores it chose by (written again only when its member changes)")
	if err := d.kubectl("get", "placement", "roomy", "-n", ns, "-o",
		`jsonpath={range .status.scores[*]}{.cluster}{"\t"}{.score}{"\t"}{.reason}{"\n"}{end}`); err != nil {
		return err
	}
	step("A Release divides 6 replicas of cart across the members by weight, 3/2/1: each member's share\n" +
		"   is an override of its Deployment's spec.replicas, shown in its status")
	fmt.Print(cartYAML)
	if err := d.applyRegistry("cart-*.yaml", cartYAML); err != nil {
		return err
	}
	return d.showShares(map[string]int32{"member-1": 3, "member-2": 2, "member-3": 1})
}

// showShares waits until the cart Release's members report the shares want, Ready, and describes
// it.
func (d *demo) showShares(want map[string]int32) error {
	if err := waitShares(d.ctx, d.lf, "cart", want); err != nil {
		return err
	}
	return d.cr("describe", "release", "cart", "-n", d.lf.Namespace)
}

// applyOn applies a manifest to a member, as its administrator.
func (d *demo) applyOn(m *localfleet.Member, manifest string) error {
	file, err := writeTemp("member-*.yaml", manifest)
	if err != nil {
		return err
	}
	defer os.Remove(file)
	return d.member(m, "apply", "-f", file)
}

// applyRegistry applies a manifest to the registry, in the demo's cluster set.
func (d *demo) applyRegistry(pattern, manifest string) error {
	file, err := writeTemp(pattern, manifest)
	if err != nil {
		return err
	}
	defer os.Remove(file)
	return d.kubectl("apply", "-n", d.lf.Namespace, "-f", file)
}

// waitRequested waits until the members' Clusters say their Pods request at least the cpu
// given, and every demo member has figures.
func (d *demo) waitRequested(cpu map[string]string) error {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		list, err := d.clusters.List(d.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ok := len(list.Items) == len(d.lf.Members)
		for _, c := range list.Items {
			r := c.Status.Resources
			if r == nil {
				ok = false
				continue
			}
			if want, asked := cpu[c.Name]; asked {
				got := r.Requested["cpu"]
				ok = ok && got.Cmp(resource.MustParse(want)) >= 0
			}
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("the members' capacity was not in their Clusters' status within 2 minutes (is the capacity controller running?)")
}

// waitShares waits until every member want names reports its share of the Release's division
// of the same name, at the Release's revision, and the Release is Ready on them all.
func waitShares(ctx context.Context, lf *localfleet.Fleet, release string, want map[string]int32) error {
	cs := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	var got map[string]int32
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		rel, err := cs.Releases(lf.Namespace).Get(ctx, release, metav1.GetOptions{})
		if err != nil {
			return err
		}
		slices, err := cs.ReleaseStatusSlices(lf.Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=" + release})
		if err != nil {
			return err
		}
		got = map[string]int32{}
		for _, m := range v1alpha1.MembersOf(rel, slices.Items) {
			for _, s := range m.Shares {
				if s.Name == release && (m.Phase == v1alpha1.PhaseReady || m.Phase == v1alpha1.PhaseDeparted) {
					got[m.Cluster] = s.Replicas
				}
			}
		}
		if maps.Equal(got, want) && rel.Status.Ready == rel.Status.Members {
			return nil
		}
	}
	return fmt.Errorf("release %s: the members' shares are %s, want %s", release, sharesText(got), sharesText(want))
}

// sharesText is shares as member=n, by member.
func sharesText(shares map[string]int32) string {
	var out []string
	for _, m := range slices.Sorted(maps.Keys(shares)) {
		out = append(out, fmt.Sprintf("%s=%d", m, shares[m]))
	}
	return strings.Join(out, " ")
}
