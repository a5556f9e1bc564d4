package tunnel_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/join"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// An operator at the edge joins the member through the tunnel: the agent that join's Deployment
// describes, run as konnectivity's own process with that Deployment's flags and Secret, connects,
// and the member is probed Ready through it with the token join stored. Unjoin removes the agent's
// account, and its token opens no tunnel again.
func TestJoinThroughTheTunnel(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 3*time.Minute)
	r := startRig(t)
	reg, err := join.RegistryFor(lf.Registry.Config, fleettest.NewSet(t, lf))
	require.NoError(t, err)
	ca, err := os.ReadFile(r.agentCAFile)
	require.NoError(t, err)
	tunnelOpts := &join.TunnelOptions{Server: r.agents, ServerCA: ca, Destination: memberAddress(t)}
	opts := join.Options{Name: "edge", Tunnel: tunnelOpts, TokenTTL: join.MinTokenTTL}

	t.Run("a dry run shows the agent's manifests, without a token, and makes nothing", func(t *testing.T) { dryRunMakesNothing(t, reg, opts) })

	var progress bytes.Buffer
	opts.Progress = &progress
	res, err := join.Join(ctx, lf.Members[0].Config, reg, opts)
	require.NoError(t, err, progress.String())
	requireJoinedForTheTunnel(t, reg, res)

	member := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	ns := res.Account.Namespace
	deployment, err := member.AppsV1().Deployments(ns).Get(ctx, agent.Name, metav1.GetOptions{})
	require.NoError(t, err)
	agentSecret, err := member.CoreV1().Secrets(ns).Get(ctx, agent.Name, metav1.GetOptions{})
	require.NoError(t, err)
	host := access.TunnelHost(reg.Namespace, "edge-agent")
	proc, tokenFile := r.runDeployed(t, deployment, agentSecret)
	r.waitConnected(t, host)

	cond := probe(t, reg.Namespace, resolverFor(t, r.dialer()))
	require.Equal(t, v1alpha1.ReasonReachable, cond.Reason, cond.Message)
	require.True(t, canReplaceAgentToken(t, member, res.Account), "the member's account may not replace its agent's token, so no renewer can")

	outer := t
	t.Run("a renewer replaces the agent's token on the member, through the tunnel", func(t *testing.T) {
		members := multicluster.MembersOf(resolverFor(t, r.dialer()), []v1alpha1.Cluster{*res.Cluster}, multicluster.FleetOptions{})
		// The renewer runs as an account of its own with what ships grants it: the rotation
		// ClusterRole (deploy/health) bound in the set, and the set's agent Role.
		rotator := renewerAccount(t, reg.Namespace)
		rot, err := rotation.New(fleettest.Fixed(members), rotation.Options{Kube: rotator, RenewAt: 0.001})
		require.NoError(t, err)
		// Due a few hundred milliseconds after join issued it.
		var renewed *rotation.Renewal
		require.Eventually(t, func() bool {
			renewals, errs := rot.RenewDue(ctx)
			require.Empty(t, errs)
			for i := range renewals {
				if renewals[i].Agent == "edge-agent" {
					renewed = &renewals[i]
				}
			}
			return renewed != nil
		}, time.Minute, 200*time.Millisecond)
		fresh, err := member.CoreV1().Secrets(ns).Get(ctx, agent.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEqual(t, agentSecret.Data[agent.TokenKey], fresh.Data[agent.TokenKey])
		require.Equal(t, renewed.Expires.UTC().Format(time.RFC3339), fresh.Annotations[v1alpha1.TokenExpiresAnnotation])
		// The agent, restarted with the new token, connects again.
		require.NoError(t, proc.Process.Kill())
		require.Eventually(t, func() bool { return !r.server.Connected(host) }, time.Minute, 50*time.Millisecond)
		proc, tokenFile = r.runDeployed(outer, deployment, fresh)
		r.waitConnected(t, host)
		// A renewer at the usual two thirds finds nothing due, and writes nothing.
		usual, err := rotation.New(fleettest.Fixed(members), rotation.Options{Kube: rotator})
		require.NoError(t, err)
		again, errs := usual.RenewDue(ctx)
		require.Empty(t, errs)
		require.Empty(t, again, "tokens renewed a moment ago were renewed again")
		unchanged, err := member.CoreV1().Secrets(ns).Get(ctx, agent.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, fresh.ResourceVersion, unchanged.ResourceVersion, "the agent's Secret was written with nothing due")
	})

	unjoinCutsTheAgentOff(t, r, reg, proc, tokenFile)
}

// dryRunMakesNothing: join's dry run shows the agent's manifests, without a token, and makes
// nothing.
func dryRunMakesNothing(t *testing.T, reg join.Registry, opts join.Options) {
	ctx := fleettest.Context(t, time.Minute)
	var progress bytes.Buffer
	opts.DryRun, opts.Progress = true, &progress
	res, err := join.Join(ctx, lf.Members[0].Config, reg, opts)
	require.NoError(t, err, progress.String())
	require.Contains(t, progress.String(), "kind: Deployment")
	require.Contains(t, progress.String(), "--agent-id="+access.TunnelHost(reg.Namespace, "edge-agent"))
	require.NotNil(t, res.Agent)
	_, err = reg.Kube.CoreV1().ServiceAccounts(reg.Namespace).Get(ctx, "edge-agent", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a dry run made the agent's ServiceAccount: %v", err)
}

// requireJoinedForTheTunnel: the Cluster says its tunnel, its token is pinned to the agent, whose
// ServiceAccount names its destination and is listed in the set's agent Role.
func requireJoinedForTheTunnel(t *testing.T, reg join.Registry, res *join.Result) {
	t.Helper()
	ctx := fleettest.Context(t, time.Minute)
	require.Equal(t, &v1alpha1.Tunnel{Agent: "edge-agent"}, res.Cluster.Spec.KubernetesAPIEndpoints.Tunnel)
	secret, err := reg.Kube.CoreV1().Secrets(reg.Namespace).Get(ctx, "edge-token", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "edge-agent", secret.Annotations[v1alpha1.TunnelAgentAnnotation], "the member's token is not pinned to its agent")
	sa, err := reg.Kube.CoreV1().ServiceAccounts(reg.Namespace).Get(ctx, "edge-agent", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, memberAddress(t), sa.Annotations[agent.DestinationAnnotation])
	role, err := reg.Kube.RbacV1().Roles(reg.Namespace).Get(ctx, agent.TokensRole, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"edge-agent"}, role.Rules[0].ResourceNames)
}

// unjoinCutsTheAgentOff: unjoin deletes the agent's ServiceAccount and its Role, the running
// agent (proc, reading tokenFile) is disconnected, and a new one with its token is refused.
func unjoinCutsTheAgentOff(t *testing.T, r *rig, reg join.Registry, proc *exec.Cmd, tokenFile string) {
	t.Helper()
	ctx := fleettest.Context(t, 2*time.Minute)
	host := access.TunnelHost(reg.Namespace, "edge-agent")
	var unjoined bytes.Buffer
	_, err := join.Unjoin(ctx, reg, "edge", join.UnjoinOptions{Member: lf.Members[0].Config, Progress: &unjoined})
	require.NoError(t, err, unjoined.String())
	require.Contains(t, unjoined.String(), "the tunnel agent's (and its tokens) deleted")
	_, err = reg.Kube.CoreV1().ServiceAccounts(reg.Namespace).Get(ctx, "edge-agent", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "unjoin left the agent's ServiceAccount: %v", err)
	_, err = reg.Kube.RbacV1().Roles(reg.Namespace).Get(ctx, agent.TokensRole, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "unjoin left its agent in %s: %v", agent.TokensRole, err)
	// The running agent, its account gone, is cut off at the server's next review of its token,
	// and its reconnections are refused; so is a new agent with the same token.
	require.Eventually(t, func() bool { return r.logged("disconnected a tunnel agent") && !r.server.Connected(host) }, time.Minute, 50*time.Millisecond,
		"an unjoined agent stayed connected")
	require.Eventually(t, func() bool { return r.logged("refused a tunnel agent") }, time.Minute, 50*time.Millisecond,
		"an unjoined agent's token still opened a tunnel")
	require.NoError(t, proc.Process.Kill())
	r.startAgent(t, tokenFile, host)
	time.Sleep(2 * time.Second) // a few of the agent's attempts, at --sync-interval=200ms
	require.False(t, r.server.Connected(host))
}

// runDeployed runs konnectivity's agent as the Deployment says, with the Secret's files where it
// mounts them (here a directory of the test's), until the test ends. It returns the process and
// the token's file.
func (r *rig) runDeployed(t *testing.T, d *appsv1.Deployment, s *corev1.Secret) (*exec.Cmd, string) {
	t.Helper()
	dir := t.TempDir()
	for key, value := range s.Data {
		require.NoError(t, os.WriteFile(filepath.Join(dir, key), value, 0o600))
	}
	var args []string
	var host, port string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		host = cutPrefix(a, "--proxy-server-host=", host)
		port = cutPrefix(a, "--proxy-server-port=", port)
		switch {
		case strings.HasPrefix(a, "--health-server-port="):
			a = "--health-server-port=" + freePort(t)
		case strings.HasPrefix(a, "--admin-server-port="):
			a = "--admin-server-port=" + freePort(t)
		}
		args = append(args, strings.ReplaceAll(a, agent.MountPath, dir))
	}
	assets, err := localfleet.AssetsDir("")
	require.NoError(t, err)
	require.NoError(t, lf.Members[0].Bridge(net.JoinHostPort(host, port)))
	cmd := atTheEdge(filepath.Join(assets, "konnectivity-agent"), append(args, "--sync-interval=200ms", "--sync-interval-cap=1s")...)
	start(t, fmt.Sprintf("agent as deployed, %v", args), cmd)
	return cmd, filepath.Join(dir, agent.TokenKey)
}

// cutPrefix is what follows prefix in s, or else what.
func cutPrefix(s, prefix, what string) string {
	if rest, ok := strings.CutPrefix(s, prefix); ok {
		return rest
	}
	return what
}

// renewerAccount is a client of the registry as ServiceAccount renewer of ns, bound there to the
// rules of deploy/health/rotation-clusterrole.yaml and to agent.TokensRole, as the chart binds the
// rotation controller: nothing more.
func renewerAccount(t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	ctx := fleettest.Context(t, time.Minute)
	admin := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	data, err := os.ReadFile(filepath.Join("..", "deploy", "health", "rotation-clusterrole.yaml"))
	require.NoError(t, err)
	var shipped rbacv1.ClusterRole
	require.NoError(t, yaml.Unmarshal(data, &shipped))
	_, err = admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "renewer"}, Rules: shipped.Rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "renewer"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "renewer"}}
	for name, role := range map[string]string{"renewer": "renewer", "renewer-tunnel-agents": agent.TokensRole} {
		_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	cfg := rest.CopyConfig(lf.Registry.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":renewer"}
	return kubernetes.NewForConfigOrDie(cfg)
}

// canReplaceAgentToken asks the member whether the account may update its agent's Secret.
func canReplaceAgentToken(t *testing.T, member kubernetes.Interface, account join.Account) bool {
	t.Helper()
	review, err := member.AuthorizationV1().SubjectAccessReviews().Create(fleettest.Context(t, time.Minute), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + account.Namespace + ":" + account.Name,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: account.Namespace, Verb: "update", Resource: "secrets", Name: agent.Name,
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return review.Status.Allowed
}
