package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/join"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// userKubeconfig is a kubeconfig as a user would have one: a context for the registry and one
// per member, each with its administrator's credentials.
func userKubeconfig(t *testing.T, lf *localfleet.Fleet, members map[string]*localfleet.Member) string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	add := func(name, path string) {
		cfg, err := clientcmd.LoadFromFile(path)
		require.NoError(t, err)
		ctx := cfg.Contexts[cfg.CurrentContext]
		merged.Clusters[name] = cfg.Clusters[ctx.Cluster]
		merged.AuthInfos[name] = cfg.AuthInfos[ctx.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	add("registry", lf.Registry.Kubeconfig)
	for name, m := range members {
		add(name, m.Kubeconfig)
	}
	merged.CurrentContext = "registry"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*merged, path))
	return path
}

// registryID is the local fleet's registry as join names it on members.
func registryID(ctx context.Context, lf *localfleet.Fleet) string {
	return join.Registry{Kube: kubernetes.NewForConfigOrDie(lf.Registry.Config), Server: lf.Registry.Config.Host}.ID(ctx)
}

// ownerAnnotations say, as join's do, that an object on a member is the registry's Cluster's.
func ownerAnnotations(registryID, namespace, name string) map[string]string {
	return map[string]string{join.RegistryAnnotation: registryID, join.ClusterAnnotation: namespace + "/" + name}
}

// join registers two clusters of a user's kubeconfig; tools reach them through the registry with
// the pinned tokens join made; a second join updates, a name taken by another server is refused.
func TestJoin(t *testing.T) {
	realservers.Required(t)
	lf := sharedSet(t) // an empty cluster set of the test's own, into which the user joins
	joined := lf.Namespace
	ctx := t.Context()
	kubeconfig := userKubeconfig(t, lf, map[string]*localfleet.Member{"alpha": lf.Members[0], "beta": lf.Members[1]})
	cli := commandLine(ctx, kubeconfig, joined)
	code, _, stderr := cli("install", "--create-namespace")
	require.Equal(t, 0, code, stderr)
	memberKube := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	regID := registryID(ctx, lf)
	s := &joinScenario{lf: lf, joined: joined, ctx: ctx, kubeconfig: kubeconfig, cli: cli, memberKube: memberKube, regID: regID}
	s.refusals(t)
	s.joinsAndJoinsAgain(t)
	s.cleansUpEarlierBuilds(t)
	s.get(t)
	s.toolsReachMembers(t)
	s.rotation(t)
	s.ownership(t)
	s.refusedJoins(t)
	s.unjoin(t)
}

// joinScenario is what the parts of TestJoin share, in order: each part starts where the one
// before it left the registry and the members.
type joinScenario struct {
	lf         *localfleet.Fleet
	joined     string
	ctx        context.Context
	kubeconfig string
	cli        func(args ...string) (int, string, string)
	memberKube *kubernetes.Clientset
	regID      string
	registry   *versioned.Clientset
	resolver   *access.Resolver
	list       *v1alpha1.ClusterList
	replaced   []*corev1.Secret
}

// refusals: a dry run, a ClusterRole the member lacks and a missing cluster set each do nothing on
// the member.
func (s *joinScenario) refusals(t *testing.T) {
	lf, joined, ctx, kubeconfig, cli, memberKube := s.lf, s.joined, s.ctx, s.kubeconfig, s.cli, s.memberKube
	// A dry run checks and says what it would do, and does nothing; so does a role the member lacks.
	code, out, stderr := cli("join", "alpha", "--dry-run", "--labels", "env=test")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "registry: Cluster "+joined+"/alpha would be created (server dry run)")
	// A dry run says everything the run would do: the Role and RoleBinding and the token too.
	require.Contains(t, out, "member: would apply Role and RoleBinding ")
	require.Contains(t, out, "member: would ask for a token of ")
	code, _, stderr = cli("join", "alpha", "--cluster-role", "no-such-role")
	require.Equal(t, 1, code, "a ClusterRole the member lacks is found by asking it: not a usage error")
	require.Contains(t, stderr, `member: ClusterRole "no-such-role" does not exist on `+lf.Members[0].URL()+" (nothing was done)")
	require.Empty(t, joinAccounts(t, memberKube, joined), "a dry run or refused join made a service account")
	// So does a cluster set the registry does not have: nothing is made on the member.
	code, _, stderr = commandLine(ctx, kubeconfig, "nosuchns")("join", "alpha")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `namespaces "nosuchns" not found; make the cluster set with: clusterregistry install --create-namespace -n nosuchns`)
	require.Contains(t, stderr, "(nothing was done)")
	require.Empty(t, joinAccounts(t, memberKube, joined), "a join into a missing cluster set made a service account")
}

// joinsAndJoinsAgain: both contexts join; joined again, a Cluster is unchanged; -o prints it.
func (s *joinScenario) joinsAndJoinsAgain(t *testing.T) {
	lf, joined, cli := s.lf, s.joined, s.cli
	for _, name := range []string{"alpha", "beta"} {
		code, out, stderr := cli("join", name, "--labels", "env=test,joined=yes", "--cluster-role", "cluster-admin")
		require.Equal(t, 0, code, "%s%s", out, stderr)
		require.Contains(t, out, "registry: Cluster "+joined+"/"+name+" created")
		require.Contains(t, out, "next: clusterregistry health -n "+joined+" probes the members")
		require.Contains(t, out, "next: clusterregistry health -n "+joined+" --rotate-credentials renews the token")
	}
	code, out, stderr := cli("join", "alpha", "--labels", "env=test,joined=yes", "--cluster-role", "cluster-admin")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "registry: Cluster "+joined+"/alpha unchanged", "a second join duplicated or changed the Cluster")
	// -o: the Cluster on stdout, as the registry has it, and the report on stderr.
	code, out, stderr = cli("join", "alpha", "--labels", "env=test,joined=yes", "--cluster-role", "cluster-admin", "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "registry: Cluster "+joined+"/alpha unchanged")
	var printed v1alpha1.Cluster
	require.NoError(t, json.Unmarshal([]byte(out), &printed), out)
	require.Equal(t, "Cluster", printed.Kind)
	require.Equal(t, "alpha", printed.Name)
	require.Equal(t, lf.Members[0].URL(), printed.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress)
	require.Empty(t, printed.ManagedFields)
	code, out, stderr = cli("join", "beta", "--dry-run", "-o", "name")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "cluster.clusterregistry.k8s.io/beta\n", out)
}

// cleansUpEarlierBuilds: what earlier builds made in kube-system for this Cluster goes on a join,
// and others' stays.
func (s *joinScenario) cleansUpEarlierBuilds(t *testing.T) {
	lf, joined, ctx, cli, regID := s.lf, s.joined, s.ctx, s.cli, s.regID
	// What join made in kube-system in earlier builds of main for this Cluster goes when it is joined again, and
	// what it made for others stays.
	betaKube := kubernetes.NewForConfigOrDie(lf.Members[1].Config)
	for _, owner := range []string{"beta", "someone-else"} {
		meta := metav1.ObjectMeta{Name: join.AccountFor(regID, joined, owner).Name, Annotations: ownerAnnotations(regID, joined, "beta")}
		if owner != "beta" {
			meta.Annotations = ownerAnnotations(regID, joined, owner)
		}
		_, err := betaKube.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = betaKube.RbacV1().Roles("kube-system").Create(ctx, &rbacv1.Role{ObjectMeta: meta}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	code, out, stderr := cli("join", "beta", "--labels", "env=test,joined=yes", "--cluster-role", "cluster-admin")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "member: ServiceAccount kube-system/"+join.AccountFor(regID, joined, "beta").Name+", made by an earlier join, deleted\n")
	require.Contains(t, out, "member: Role kube-system/"+join.AccountFor(regID, joined, "beta").Name+", made by an earlier join, deleted\n")
	_, err := betaKube.CoreV1().ServiceAccounts("kube-system").Get(ctx, join.AccountFor(regID, joined, "beta").Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	require.NoError(t, betaKube.CoreV1().ServiceAccounts("kube-system").Delete(ctx, join.AccountFor(regID, joined, "someone-else").Name, metav1.DeleteOptions{}),
		"another Cluster's account was removed")
	require.NoError(t, betaKube.RbacV1().Roles("kube-system").Delete(ctx, join.AccountFor(regID, joined, "someone-else").Name, metav1.DeleteOptions{}))
}

// get: the overview and kubectl's formats, never a token.
func (s *joinScenario) get(t *testing.T) {
	lf, joined, ctx, kubeconfig, cli := s.lf, s.joined, s.ctx, s.kubeconfig, s.cli
	// get: the overview, with the expiry of the token join stored (and never the token), and the
	// Clusters themselves in kubectl's formats.
	code, out, stderr := cli("get")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^NAME\s+READY\s+REASON\s+VERSION\s+LAST REPORT\s+CREDENTIAL\s+EXPIRES$`, lines[0])
	require.Regexp(t, `^alpha\s+Unknown\s+-\s+-\s+never\s+secret\s+in (7h5\dm|8h)$`, lines[1]) // 8 hours by default
	token, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(joined).Get(ctx, "alpha-token", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, out, string(token.Data["token"]))
	code, out, _ = cli("get", "-A", "-o", "wide")
	require.Equal(t, 0, code)
	require.Regexp(t, `(?m)^NAMESPACE\s+NAME\s+.*\s+SERVER\s+MESSAGE$`, out)
	require.Regexp(t, `(?m)^`+joined+`\s+beta\s+.*`+regexp.QuoteMeta(lf.Members[1].URL()), out)
	code, out, _ = cli("get", "-o", "name")
	require.Equal(t, 0, code)
	require.Equal(t, "cluster.clusterregistry.k8s.io/alpha\ncluster.clusterregistry.k8s.io/beta\n", out)
	code, out, _ = cli("get", "alpha", "-o", "jsonpath={.spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress}")
	require.Equal(t, 0, code)
	require.Equal(t, lf.Members[0].URL(), out)
	code, out, _ = cli("list", "-l", "joined=yes", "-o", "json")
	require.Equal(t, 0, code)
	var got struct {
		Kind  string
		Items []v1alpha1.Cluster
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, "List", got.Kind)
	require.Len(t, got.Items, 2)
	code, _, stderr = cli("get", "alpha", "nosuch")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no Cluster nosuch in namespace "+joined)
	code, _, stderr = cli("get", "-o", "table")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "-o table: want one of")
	t.Run("completion", func(t *testing.T) { testCompletion(t, kubeconfig, joined) })
}

// toolsReachMembers: a tool reaches each member through the registry alone.
func (s *joinScenario) toolsReachMembers(t *testing.T) {
	lf, joined, ctx := s.lf, s.joined, s.ctx
	// A tool reaches each member through the registry alone.
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config))})
	require.NoError(t, err)
	list, err := registry.ClusterregistryV1alpha1().Clusters(joined).List(ctx, metav1.ListOptions{LabelSelector: "joined=yes"})
	require.NoError(t, err)
	require.Len(t, list.Items, 2)
	results := multicluster.Map(ctx, multicluster.MembersOf(resolver, list.Items, multicluster.FleetOptions{}),
		func(ctx context.Context, m *multicluster.Member) (string, error) {
			kube, err := m.Kubernetes(ctx)
			if err != nil {
				return "", err
			}
			ns, err := kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return string(ns.UID), nil
		})
	require.NoError(t, results.Err())
	s.registry, s.resolver, s.list = registry, resolver, list
}

// rotation: the account join made renews its own token (a rotator, join again, the rotate command),
// each replaced token revoked.
func (s *joinScenario) rotation(t *testing.T) {
	lf, joined, ctx, cli, resolver, list := s.lf, s.joined, s.ctx, s.cli, s.resolver, s.list
	secret, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(joined).Get(ctx, "alpha-token", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, lf.Members[0].URL(), secret.Annotations[v1alpha1.ServersAnnotation])
	// The account may renew its own token and nothing else: a rotator does, with the token join
	// stored, and the new token replaces it with its expiry.
	regAccount := join.AccountFor(registryID(ctx, lf), joined, "alpha")
	require.Equal(t, regAccount.String(), secret.Annotations[v1alpha1.ServiceAccountAnnotation])
	require.NotEmpty(t, secret.Annotations[v1alpha1.TokenExpiresAnnotation])
	var alpha []v1alpha1.Cluster
	for _, c := range list.Items {
		if c.Name == "alpha" {
			alpha = append(alpha, c)
		}
	}
	rotator, err := rotation.New(fleettest.Fixed(multicluster.MembersOf(resolver, alpha, multicluster.FleetOptions{})),
		rotation.Options{Kube: kubernetes.NewForConfigOrDie(lf.Registry.Config), RenewAt: 1e-9})
	require.NoError(t, err)
	renewed, errs := rotator.RenewDue(ctx)
	require.Empty(t, errs)
	require.Len(t, renewed, 1)
	rotated, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(joined).Get(ctx, "alpha-token", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, string(secret.Data["token"]), string(rotated.Data["token"]))
	require.Equal(t, 1, renewed[0].Revoked)
	// The token it replaced, join's, stops working (checked at the end, with the others: a
	// member's API server may accept a token it has just checked for 10 more seconds); the new
	// one works.
	replaced := []*corev1.Secret{secret}
	requireWorks(t, rotated)
	secret = rotated
	// Joining again replaces the rotator's token, and revokes it; asked to, it lets the account
	// create namespaces too (unjoin removes that binding with the rest).
	code, out, stderr := cli("join", "alpha", "--labels", "env=test,joined=yes", "--cluster-role", "cluster-admin", "--allow-namespace-creation")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "member: 1 replaced token(s) revoked\n")
	require.Contains(t, out, "-namespaces to ClusterRole clusterregistry-namespace-creator applied: the account may create namespaces")
	replaced = append(replaced, secret)
	secret, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(joined).Get(ctx, "alpha-token", metav1.GetOptions{})
	require.NoError(t, err)
	requireWorks(t, secret)
	// The command does the same: one pass, forced, says what it renewed and revoked.
	code, out, stderr = cli("rotate", "--once", "--renew-at", "0.000001")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, joined+"/alpha: Secret alpha-token renewed, valid until ")
	require.Contains(t, out, joined+"/beta: Secret beta-token renewed, valid until ")
	require.Equal(t, 2, strings.Count(out, "; 1 replaced token(s) revoked\n"), out)
	require.Regexp(t, `(?m)^next: `+joined+`/(alpha|beta), Secret (alpha|beta)-token, due \S+Z \((in \d+s|now)\)$`, out, "when the next renewal is due")
	replaced = append(replaced, secret)
	code, out, stderr = cli("rotate", "--once")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Regexp(t, `^no token is due; next: `+joined+`/(alpha|beta), Secret (alpha|beta)-token, due \S+Z \(in 5h\d+m\)\n$`, out)
	code, _, stderr = cli("rotate", "--renew-at", "2")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--renew-at 2: want a fraction of a token's life between 0 and 1")
	secret, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(joined).Get(ctx, "alpha-token", metav1.GetOptions{})
	require.NoError(t, err)
	requireWorks(t, secret)
	s.replaced = replaced
}

// ownership: the same member joined in another set and under another name gets objects of its own,
// which unjoin removes alone.
func (s *joinScenario) ownership(t *testing.T) {
	lf, joined, ctx, kubeconfig, cli, memberKube, regID, resolver, list := s.lf, s.joined, s.ctx, s.kubeconfig, s.cli, s.memberKube, s.regID, s.resolver, s.list
	regAccount := join.AccountFor(regID, joined, "alpha")
	// What join made on the member records its owner, and is this Cluster's alone: the same
	// member joined in another set, and under another name in this one (with a warning), gets
	// objects of its own, and unjoin of those leaves "+joined+"/alpha's token working.
	sa, err := memberKube.CoreV1().ServiceAccounts(regAccount.Namespace).Get(ctx, regAccount.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, joined+"/alpha", sa.Annotations["clusterregistry.k8s.io/cluster"])
	require.Equal(t, regID, sa.Annotations["clusterregistry.k8s.io/registry"])
	otherSet := fleettest.NewSet(t, lf)
	other := commandLine(ctx, kubeconfig, otherSet)
	code, _, stderr := other("install", "--create-namespace")
	require.Equal(t, 0, code, stderr)
	code, out, stderr := other("join", "alpha")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	code, out, stderr = cli("join", "alpha", "--name", "alpha-again")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "warning: "+lf.Members[0].URL()+" is already in "+joined+" as alpha: a fan-out over the set reaches it once for each")
	require.Len(t, joinAccounts(t, memberKube, joined, otherSet), 3)
	code, out, stderr = other("unjoin", "alpha")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "member: "+lf.Members[0].URL()+`, through context "alpha"`)
	// Five: joined without --allow-namespace-creation, it has no binding to the namespace creator.
	require.Equal(t, 5, strings.Count(out, " deleted\n"), out)
	require.Contains(t, out, "-namespaces: not found\n")
	code, out, stderr = cli("unjoin", "alpha-again")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Equal(t, 5, strings.Count(out, " deleted\n"), out)
	require.Len(t, joinAccounts(t, memberKube, joined), 1)
	require.NoError(t, multicluster.Map(ctx, multicluster.MembersOf(resolver, list.Items, multicluster.FleetOptions{}),
		func(ctx context.Context, m *multicluster.Member) (string, error) {
			kube, err := m.Kubernetes(ctx)
			if err != nil {
				return "", err
			}
			_, err = kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			return "", err
		}).Err(), "unjoin of another set's or name's join revoked "+joined+"/alpha's token")
}

// refusedJoins: a taken name, a missing context, a member that does not answer and a server-less
// context are refused, registering nothing.
func (s *joinScenario) refusedJoins(t *testing.T) {
	joined, ctx, kubeconfig, cli, registry := s.joined, s.ctx, s.kubeconfig, s.cli, s.registry
	// Refused, with what to do.
	code, _, stderr := cli("join", "beta", "--name", "alpha")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "cluster "+joined+"/alpha already exists for another server; choose another --name, or unjoin it first")
	code, _, stderr = cli("join", "gamma")
	require.Equal(t, 1, code, "a context the kubeconfig lacks is 1, as kubectl --context's")
	require.Contains(t, stderr, `context "gamma" is not in the kubeconfig (it has: alpha, beta, registry)`)
	require.False(t, strings.Contains(stderr, "Bearer"))

	// A member that does not answer, and a context whose cluster has no server: nothing is made.
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	down := cfg.Clusters["alpha"].DeepCopy()
	down.Server = "https://127.0.0.1:1"
	cfg.Clusters["down"], cfg.Contexts["down"] = down, &clientcmdapi.Context{Cluster: "down", AuthInfo: "alpha"}
	cfg.Clusters["serverless"] = &clientcmdapi.Cluster{CertificateAuthorityData: down.CertificateAuthorityData}
	cfg.Contexts["serverless"] = &clientcmdapi.Context{Cluster: "serverless", AuthInfo: "alpha"}
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))
	code, _, stderr = cli("join", "down")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "member: reaching https://127.0.0.1:1 to read ClusterRole edit (nothing was done)")
	require.Contains(t, stderr, "connection refused")
	code, _, stderr = cli("join", "serverless")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `context "serverless": `)
	require.Contains(t, stderr, "server")
	for _, name := range []string{"down", "serverless"} {
		_, err = registry.ClusterregistryV1alpha1().Clusters(joined).Get(ctx, name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a failed join registered %s: %v", name, err)
	}
}

// unjoin: a dry run removes nothing; unjoin leaves nothing on either side; again, it finds nothing;
// --registry-only leaves the member alone.
func (s *joinScenario) unjoin(t *testing.T) {
	lf, joined, ctx, cli, memberKube, registry, replaced := s.lf, s.joined, s.ctx, s.cli, s.memberKube, s.registry, s.replaced
	// unjoin by the Cluster's name: a dry run says what it would remove and removes nothing;
	// then nothing is left behind on either side, and a second unjoin finds nothing, saying so.
	code, out, stderr := cli("unjoin", "alpha", "--dry-run")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Equal(t, 6, strings.Count(out, ": would be deleted (dry run)\n"), out)
	require.Len(t, joinAccounts(t, memberKube, joined), 1)
	current, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(joined).Get(ctx, "alpha-token", metav1.GetOptions{})
	require.NoError(t, err)
	code, out, stderr = cli("unjoin", "alpha")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Equal(t, 6, strings.Count(out, " deleted\n"), out)
	require.Empty(t, joinAccounts(t, memberKube, joined), "service account left on the member")
	// The token that was current (a rotator's, here) no longer works: its account is gone; nor
	// do those that the rotator, join again and rotate replaced.
	requireRefused(t, append(replaced, current)...)
	bindings, err := memberKube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, b := range bindings.Items {
		require.False(t, strings.HasPrefix(b.Name, "clusterregistry-"+joined+"-"), "binding %s left on the member", b.Name)
	}
	namespaces, err := memberKube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, ns := range namespaces.Items {
		if strings.HasPrefix(ns.Name, "clusterregistry-"+joined+"-") {
			require.NotNil(t, ns.DeletionTimestamp, "namespace %s left on the member", ns.Name)
		}
	}
	_, err = registry.ClusterregistryV1alpha1().Clusters(joined).Get(ctx, "alpha", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "Cluster left in the registry: %v", err)
	_, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(joined).Get(ctx, "alpha-token", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "Secret left in the registry: %v", err)
	// Unjoined already: nothing is found, and, as kubectl delete of a missing object, exit 1.
	code, out, stderr = cli("unjoin", "alpha")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "cluster "+joined+"/alpha not found: nothing was unjoined")
	require.Equal(t, 2, strings.Count(out, ": not found\n"), out)
	require.Contains(t, out, "member: not looked at: cluster "+joined+"/alpha, which names the member's server, is not in the registry")
	require.NotContains(t, out, "deleted")

	// --registry-only, for a member that is gone: the registry's side only.
	code, out, stderr = cli("unjoin", "beta", "--registry-only")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "member: left alone (--registry-only)")
	require.Equal(t, 2, strings.Count(out, " deleted\n"), out)
	require.Len(t, joinAccounts(t, kubernetes.NewForConfigOrDie(lf.Members[1].Config), joined), 1, "--registry-only touched the member")
}

// requireRefused fails unless the member refuses each Secret's token, within the time its API
// server takes to see a binding or account deleted (and to forget that it accepted the token,
// which it remembers for 10 seconds).
func requireRefused(t *testing.T, secrets ...*corev1.Secret) {
	t.Helper()
	for i, s := range secrets {
		require.Eventually(t, func() bool {
			_, err := kubernetes.NewForConfigOrDie(tokenConfig(s)).CoreV1().Namespaces().Get(t.Context(), "kube-system", metav1.GetOptions{})
			return apierrors.IsUnauthorized(err)
		}, 30*time.Second, 200*time.Millisecond, "token %d of %d, which should be revoked, still works", i+1, len(secrets))
	}
}

// requireWorks fails unless the member accepts the Secret's token.
func requireWorks(t *testing.T, s *corev1.Secret) {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(tokenConfig(s)).CoreV1().Namespaces().Get(t.Context(), "kube-system", metav1.GetOptions{})
	require.NoError(t, err)
}

func tokenConfig(s *corev1.Secret) *rest.Config {
	return &rest.Config{Host: s.Annotations[v1alpha1.ServersAnnotation], BearerToken: string(s.Data["token"]),
		TLSClientConfig: rest.TLSClientConfig{CAData: s.Data["ca.crt"]}}
}

// joinAccounts are the service accounts join made on a member for Clusters of the named cluster
// sets (by their names, which begin with the set's), in their namespaces.
func joinAccounts(t *testing.T, member kubernetes.Interface, sets ...string) []string {
	t.Helper()
	list, err := member.CoreV1().ServiceAccounts("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, sa := range list.Items {
		for _, set := range sets {
			if strings.HasPrefix(sa.Name, "clusterregistry-"+set+"-") {
				names = append(names, sa.Name)
			}
		}
	}
	return names
}

// testCompletion completes contexts, cluster sets and Clusters from the kubeconfig and the
// registry, as the command and as kubectl's plugin completion (kubectl_complete-clusterregistry);
// the plugin form's help says kubectl clusterregistry. TestJoin runs it on its registry.
func testCompletion(t *testing.T, kubeconfig, set string) {
	complete := func(name string, args ...string) []string {
		var stdout, stderr bytes.Buffer
		code := runAs(t.Context(), name, append([]string{"--kubeconfig", kubeconfig, "-n", set}, args...), &stdout, &stderr)
		require.Equal(t, 0, code, stderr.String())
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		require.Regexp(t, `^:\d+$`, lines[len(lines)-1], "cobra's directive ends the answer")
		return lines[:len(lines)-1]
	}
	require.Equal(t, []string{"alpha", "beta"}, complete("clusterregistry", "__complete", "unjoin", ""))
	require.Equal(t, []string{"beta"}, complete("clusterregistry", "__complete", "get", "alpha", ""))
	require.Equal(t, []string{"alpha", "beta", "registry"}, complete("kubectl_complete-clusterregistry", "join", ""))
	require.Subset(t, complete("kubectl_complete-clusterregistry", "get", "--context", ""), []string{"alpha", "registry"})
	require.Subset(t, complete("clusterregistry", "__complete", "get", "--namespace", ""), []string{set, "kube-system"})

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runAs(t.Context(), "kubectl-clusterregistry", []string{"join", "--help"}, &stdout, &stderr), stderr.String())
	require.Contains(t, stdout.String(), "kubectl clusterregistry join kind-dev --name dev")
	require.Contains(t, stdout.String(), "Usage:\n  kubectl clusterregistry join CONTEXT")
}
