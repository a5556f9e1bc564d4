package simmembers

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// What each member runs, fixed, for benchmarks of tools that read a member's workloads from
// watch caches (fleet-api): NodesPerMember Nodes, PodsPerMember Pods and DeploymentsPerMember
// Deployments, every one Ready (the Nodes of 8 cpu and 32Gi each, the Pods bound to them asking
// 100m and 256Mi), and one Helm release, HelmRelease at revision 2 in namespace
// HelmNamespace, as Helm's storage keeps it (a Secret labelled owner=helm). Their lists are
// served, and watches of them stay open without events, but for the Pods that ChurnPath makes
// and deletes.
const (
	NodesPerMember       = 3
	PodsPerMember        = 30
	DeploymentsPerMember = 5
	HelmRelease          = "web"
	HelmNamespace        = "apps"
)

// workloadPaths are the paths of the kinds served, by their list's path.
var workloadPaths = []string{"/api/v1/nodes", "/api/v1/pods", "/apis/apps/v1/deployments", "/api/v1/secrets"}

// isWorkloadWatch reports whether path is a watch of one of the kinds served.
func isWorkloadWatch(path string) bool {
	p, query, _ := strings.Cut(path, "?")
	return strings.Contains(query, "watch=true") && workloadList(p) != ""
}

// workloadList is the JSON list served at path, or "".
func workloadList(path string) string {
	lists := workloadLists()
	for i, p := range workloadPaths {
		if p == path {
			return lists[i]
		}
	}
	return ""
}

// workloadLists are the lists, made once.
var workloadLists = sync.OnceValue(func() [4]string {
	ready := corev1.ConditionTrue
	nodes := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := range NodesPerMember {
		alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
		nodes.Items = append(nodes.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + string(rune('a'+i)), ResourceVersion: "1"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}, NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.3"},
				Capacity: alloc, Allocatable: alloc}})
	}
	pods := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := range PodsPerMember {
		pods.Items = append(pods.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: HelmNamespace, Name: "web-" + itoa(i), ResourceVersion: "1"},
			Spec: corev1.PodSpec{NodeName: "node-" + string(rune('a'+i%NodesPerMember)), Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.2.0",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}})
	}
	deployments := &appsv1.DeploymentList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := range DeploymentsPerMember {
		deployments.Items = append(deployments.Items, appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: HelmNamespace, Name: "web-" + itoa(i), Generation: 1, ResourceVersion: "1"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](6)}, Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 6, ReadyReplicas: 6}})
	}
	secrets := &corev1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.Secret{helmStorage()}}
	core := clientgoscheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion)
	apps := clientgoscheme.Codecs.LegacyCodec(appsv1.SchemeGroupVersion)
	enc := func(codec runtime.Encoder, obj runtime.Object) string {
		data, _ := runtime.Encode(codec, obj)
		return string(data)
	}
	return [4]string{enc(core, nodes), enc(core, pods), enc(apps, deployments), enc(core, secrets)}
})

// helmStorage is HelmRelease's revision 2 as Helm's Secret driver stores it: the release record,
// gzipped JSON, base64'd, with the chart inside as Helm keeps it (here a small one).
func helmStorage() corev1.Secret {
	record := `{"name":"` + HelmRelease + `","namespace":"` + HelmNamespace + `","version":2,` +
		`"info":{"status":"deployed","first_deployed":"2026-11-28T10:00:00Z","last_deployed":"2026-11-29T10:00:00Z"},` +
		`"chart":{"metadata":{"name":"web","version":"1.2.0","apiVersion":"v2"},"templates":[{"name":"templates/deployment.yaml","data":"` +
		base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("# a template line of the chart\n"), 200)) + `"}]},` +
		`"config":{"replicas":6,"image":"registry.example/web:1.2.0"}}`
	var zipped bytes.Buffer
	gz := gzip.NewWriter(&zipped)
	_, _ = gz.Write([]byte(record))
	_ = gz.Close()
	return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: HelmNamespace, Name: "sh.helm.release.v1." + HelmRelease + ".v2", ResourceVersion: "1",
		Labels: map[string]string{"owner": "helm", "name": HelmRelease, "status": "deployed", "version": "2"}},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(zipped.Bytes()))}}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
