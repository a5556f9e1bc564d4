package tunnel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// The multicluster-runtime provider engages the member in its own network through the tunnel: a
// controller reconciles a ConfigMap made there, from a cache whose watch runs through the tunnel,
// and writes back to the member through the engaged cluster's client.
func TestProviderThroughTheTunnel(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	r.tunnelledMember(t, ns, memberAddress(t))
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), resolverFor(t, r.dialer()), multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	t.Cleanup(fleet.Stop)
	provider := mcprovider.New(fleet, mcprovider.Options{WarmKinds: []client.Object{&corev1.ConfigMap{}}})
	mgr, err := mcmanager.New(lf.Registry.Config, provider, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	require.NoError(t, mcbuilder.ControllerManagedBy(mgr).Named("answer").For(&corev1.ConfigMap{}).Complete(mcreconcile.Func(
		func(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
			if req.Namespace != "default" || req.Name != "question-"+ns {
				return ctrl.Result{}, nil
			}
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return ctrl.Result{}, err
			}
			answer := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "answer-" + ns}, Data: map[string]string{"from": string(req.ClusterName)}}
			return ctrl.Result{}, client.IgnoreAlreadyExists(cl.GetClient().Create(ctx, answer))
		})))
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	member := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	_, err = member.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "question-" + ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var answer *corev1.ConfigMap
	require.Eventually(t, func() bool {
		answer, err = member.CoreV1().ConfigMaps("default").Get(ctx, "answer-"+ns, metav1.GetOptions{})
		return err == nil
	}, time.Minute, 100*time.Millisecond, "the controller engaged through the tunnel did not answer on the member")
	require.Equal(t, string(mcprovider.ClusterName(types.NamespacedName{Namespace: ns, Name: "member-1"})), answer.Data["from"])
}
