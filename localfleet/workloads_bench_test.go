package localfleet_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/localfleet"
)

// What a member with workloads costs beside one without, measured in one run: the CPU its
// workload processes (kube-controller-manager, kube-scheduler, KWOK) take idle and per rollout of
// a new image to a 10-replica Deployment, and their memory, beside what an API server with its
// etcd (all a member without workloads is) takes idle; and how long such a rollout takes.
func BenchmarkMemberWithWorkloads(b *testing.B) {
	ctx := context.Background()
	f, err := localfleet.Start(ctx, localfleet.Options{Members: 1, Workloads: &localfleet.Workloads{Nodes: 3}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Stop() }()
	kube := kubernetes.NewForConfigOrDie(f.Members[0].Config)
	workloads := children("kube-controller-manager", "kube-scheduler", "kwok")
	servers := children("kube-apiserver", "etcd") // the registry's and the member's: two pairs
	if len(workloads) != 3 || len(servers) != 4 {
		b.Fatalf("found %d workload processes and %d servers, want 3 and 4", len(workloads), len(servers))
	}
	labels := map[string]string{"app": "bench"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](10), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/bench:0"}}}}}}
	if _, err := kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	rolledOut(b, kube, "registry.example/bench:0")

	time.Sleep(3 * time.Second) // settled
	const idle = 10 * time.Second
	w0, s0 := cpuSeconds(workloads), cpuSeconds(servers)
	time.Sleep(idle)
	w1, s1 := cpuSeconds(workloads), cpuSeconds(servers)

	b.ResetTimer()
	for i := range b.N {
		got, err := kube.AppsV1().Deployments("default").Get(ctx, "bench", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		image := fmt.Sprintf("registry.example/bench:%d", i+1)
		got.Spec.Template.Spec.Containers[0].Image = image
		if _, err := kube.AppsV1().Deployments("default").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		rolledOut(b, kube, image)
	}
	b.StopTimer()
	w2 := cpuSeconds(workloads)
	b.ReportMetric((w1-w0)/idle.Seconds()*1000, "workloads-idle-cpu-ms/s")
	b.ReportMetric((s1-s0)/2/idle.Seconds()*1000, "apiserver+etcd-idle-cpu-ms/s")
	b.ReportMetric((w2-w1)/float64(b.N)*1000, "workloads-cpu-ms/rollout")
	b.ReportMetric(float64(rssKiB(workloads))/1024, "workloads-MiB")
	b.ReportMetric(float64(rssKiB(servers))/2/1024, "apiserver+etcd-MiB")
}

// rolledOut waits until the bench Deployment runs image, every replica updated and available.
func rolledOut(b *testing.B, kube kubernetes.Interface, image string) {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		d, err := kube.AppsV1().Deployments("default").Get(context.Background(), "bench", metav1.GetOptions{})
		if err == nil && d.Spec.Template.Spec.Containers[0].Image == image && d.Status.ObservedGeneration == d.Generation &&
			d.Status.UpdatedReplicas == 10 && d.Status.AvailableReplicas == 10 && d.Status.Replicas == 10 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("not rolled out to %s within a minute: %v", image, err)
		}
	}
}

// children are this process's child processes running one of the programs named.
func children(programs ...string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read past its closing parenthesis.
		comm := string(stat[strings.IndexByte(string(stat), '(')+1 : strings.LastIndexByte(string(stat), ')')])
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		for _, p := range programs {
			if strings.HasPrefix(p, comm) { // comm is cut at 15 bytes
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// cpuSeconds is the user and system CPU the processes have used.
func cpuSeconds(pids []int) float64 {
	var ticks int
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		utime, _ := strconv.Atoi(fields[11])
		stime, _ := strconv.Atoi(fields[12])
		ticks += utime + stime
	}
	return float64(ticks) / 100 // USER_HZ
}

// rssKiB is the processes' resident memory.
func rssKiB(pids []int) int {
	total := 0
	for _, pid := range pids {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.Fields(rest)[0])
				total += n
			}
		}
	}
	return total
}
