package capacity_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// A member whose account may list Pods but not Nodes (join's default role, edit, has none) is
// said once, naming the member and what to grant, with no token in the line, and nothing is
// written for it.
func TestRefusedMemberIsSaidOnce(t *testing.T) {
	fleetmain.Integration(t)
	ns := fleettest.CopySet(t, lf)
	member := lf.Members[0]
	ctx := fleettest.Context(t, 2*time.Minute)
	kube := kubernetes.NewForConfigOrDie(member.Config)
	name := ns + "-no-nodes"
	_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = kube.CoreV1().ServiceAccounts("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	secrets := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns)
	secret, err := secrets.Get(ctx, member.Name+"-token", metav1.GetOptions{})
	require.NoError(t, err)
	secret.Data["token"] = []byte(tr.Status.Token)
	_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
	require.NoError(t, err)

	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	c, err := capacity.New(capacity.Options{Registry: versioned.NewForConfigOrDie(lf.Registry.Config), Members: startFleet(t, ns),
		Interval: 100 * time.Millisecond, Logger: logr.Logger(logger)})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })

	refusals := func() (n int, all string) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, "refuses to list nodes") {
				n++
			}
		}
		return n, strings.Join(lines, "\n")
	}
	require.Eventually(t, func() bool { n, _ := refusals(); return n == 1 }, time.Minute, 50*time.Millisecond, "the refusal said")
	time.Sleep(2 * time.Second) // twenty observations more
	n, all := refusals()
	require.Equal(t, 1, n, "said more than once:\n%s", all)
	require.Contains(t, all, `"cluster"="`+ns+`/`+member.Name+`"`)
	require.Contains(t, all, "may list and watch nodes and pods")
	require.NotContains(t, all, tr.Status.Token)
	require.Zero(t, c.Writes(), "a member that refuses had figures written")
}
