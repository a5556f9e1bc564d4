package join

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// TunnelOptions join a member that the registry cannot dial, from inside the member's network:
// its agent dials out to a tunnel server beside the registry, and readers reach the member's API
// server through it (package tunnel). Join then also makes
//   - in the registry, the agent's ServiceAccount in the cluster set, annotated with where the
//     agent dials (agent.DestinationAnnotation), listed in the set's agent.TokensRole, and a token
//     of it for the tunnel (agent.Audience, valid Options.TokenTTL);
//   - on the member, in the account's namespace, the agent's objects (agent.Manifests): its token
//     and the tunnel server's CA in a Secret that the account may replace (a renewer's new token),
//     and a Deployment of konnectivity's agent;
//
// and the Cluster says it is reached through the agent (spec.kubernetesApiEndpoints.tunnel), with
// its token Secret pinned to it (v1alpha1.TunnelAgentAnnotation).
type TunnelOptions struct {
	// Agent names the agent's ServiceAccount in the cluster set; Options.Name + "-agent" when empty.
	Agent string
	// Server is the tunnel server's agent address as the member's network reaches it (host:port),
	// and ServerCA, in PEM, the CA that verifies it. Required.
	Server   string
	ServerCA []byte
	// Destination is where the agent dials the member's API server, as host:port;
	// agent.DefaultDestination (an agent in a Pod of the member) when empty.
	Destination string
	// Image is the agent's container image; agent.DefaultImage when empty.
	Image string
	// Manifests, when set, receives the agent's objects as YAML instead of Join applying them to
	// the member (for a GitOps repository, say). The Secret among them holds the agent's token.
	Manifests io.Writer
}

func (t *TunnelOptions) defaults(name string) error {
	if t.Agent == "" {
		t.Agent = name + "-agent"
	}
	if errs := validation.IsDNS1123Label(t.Agent); len(errs) > 0 {
		return fmt.Errorf("join.TunnelOptions.Agent %q: %v", t.Agent, errs)
	}
	if t.Destination == "" {
		t.Destination = agent.DefaultDestination
	}
	spec := agent.Spec{Namespace: "-", Host: "-", Server: t.Server, ServerCA: t.ServerCA}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("join.TunnelOptions: %w", err)
	}
	return nil
}

// checkAgentFree refuses an agent ServiceAccount of the set that another Cluster's join made, or
// that no join made: taking it over would hand its tunnel to this member. Nil t checks nothing.
func checkAgentFree(ctx context.Context, reg Registry, t *TunnelOptions, owner map[string]string) error {
	if t == nil {
		return nil
	}
	sa, err := reg.Kube.CoreV1().ServiceAccounts(reg.Namespace).Get(ctx, t.Agent, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("registry: reading ServiceAccount %s/%s, the tunnel agent's (nothing was done): %w", reg.Namespace, t.Agent, err)
	case !ownedBy(sa.Annotations, owner):
		return fmt.Errorf("registry: ServiceAccount %s/%s exists and is not this Cluster's agent (nothing was done); choose another agent name", reg.Namespace, t.Agent)
	}
	return nil
}

// applyAgentAccount makes the agent's ServiceAccount in the registry, lists it in the set's
// TokensRole, and mints its token.
func applyAgentAccount(ctx context.Context, out io.Writer, reg Registry, t *TunnelOptions, owner map[string]string, o *Options) (*authenticationv1.TokenRequestStatus, error) {
	ns := reg.Namespace
	annotations := map[string]string{agent.DestinationAnnotation: t.Destination}
	for k, v := range owner {
		annotations[k] = v
	}
	apply := metav1.ApplyOptions{FieldManager: o.FieldManager, Force: true}
	if _, err := reg.Kube.CoreV1().ServiceAccounts(ns).Apply(ctx, corev1ac.ServiceAccount(t.Agent, ns).WithAnnotations(annotations), apply); err != nil {
		return nil, fmt.Errorf("registry: applying ServiceAccount %s/%s, the tunnel agent's: %w", ns, t.Agent, err)
	}
	if err := listInTokensRole(ctx, reg, t.Agent, true); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "registry: ServiceAccount %s/%s applied: the tunnel agent, dialling %s on the member; listed in Role %s\n", ns, t.Agent, t.Destination, agent.TokensRole)
	tr, err := reg.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, t.Agent, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{agent.Audience}, ExpirationSeconds: ptr.To(int64(o.TokenTTL / time.Second)),
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("registry: asking for a token of the tunnel agent %s/%s: %w", ns, t.Agent, err)
	}
	return &tr.Status, nil
}

// listInTokensRole adds the agent to, or takes it from, the set's TokensRole: the one rule that
// lets a renewer mint tokens of the set's agents, and of no other ServiceAccount.
func listInTokensRole(ctx context.Context, reg Registry, name string, listed bool) error {
	roles := reg.Kube.RbacV1().Roles(reg.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		role, err := roles.Get(ctx, agent.TokensRole, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if !listed {
				return nil
			}
			role = &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: agent.TokensRole, Namespace: reg.Namespace}}
		} else if err != nil {
			return err
		}
		var names []string
		if len(role.Rules) == 1 {
			names = slices.DeleteFunc(role.Rules[0].ResourceNames, func(n string) bool { return n == name })
		}
		if listed {
			names = append(names, name)
		}
		slices.Sort(names)
		role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: names}}
		if role.ResourceVersion == "" {
			_, err = roles.Create(ctx, role, metav1.CreateOptions{})
			return err
		}
		if len(names) == 0 {
			return roles.Delete(ctx, agent.TokensRole, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &role.ResourceVersion}})
		}
		_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("registry: listing the tunnel agent %s in Role %s/%s: %w", name, reg.Namespace, agent.TokensRole, err)
	}
	return nil
}

// agentSpec is the agent of the member's account namespace.
func agentSpec(t *TunnelOptions, account Account, namespace string, owner map[string]string) agent.Spec {
	return agent.Spec{
		Namespace: account.Namespace, Host: access.TunnelHost(namespace, t.Agent),
		Server: t.Server, ServerCA: t.ServerCA, Image: t.Image, Annotations: owner,
	}
}

// deliverAgent applies the agent's manifests on the member, or writes them to t.Manifests.
func deliverAgent(ctx context.Context, out io.Writer, memberKube kubernetes.Interface, m agent.Manifests, t *TunnelOptions, fieldManager string) error {
	if t.Manifests != nil {
		if err := writeManifests(t.Manifests, m); err != nil {
			return fmt.Errorf("writing the tunnel agent's manifests: %w", err)
		}
		fmt.Fprintf(out, "member: the tunnel agent's manifests are written out, not applied: apply them on the member (their Secret holds the agent's token)\n")
		return nil
	}
	for _, obj := range m.Objects() {
		if err := applyObject(ctx, memberKube, obj, fieldManager); err != nil {
			return fmt.Errorf("member: applying the tunnel agent's %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	fmt.Fprintf(out, "member: the tunnel agent's ServiceAccount, Secret and Deployment %s/%s applied\n", m.Deployment.Namespace, agent.Name)
	return nil
}

// joinTunnel makes the tunnel's parts, once the member's account is made: the agent's account
// and token in the registry, then its objects on the member (or written out). It returns them,
// the token left out.
func joinTunnel(ctx context.Context, out io.Writer, memberKube kubernetes.Interface, reg Registry, o *Options, account Account, owner map[string]string) (*agent.Manifests, error) {
	t := o.Tunnel
	token, err := applyAgentAccount(ctx, out, reg, t, owner, o)
	if err != nil {
		return nil, err
	}
	m := agent.ManifestsFor(agentSpec(t, account, reg.Namespace, owner), token.Token, token.ExpirationTimestamp.Time)
	if err := deliverAgent(ctx, out, memberKube, m, t, o.FieldManager); err != nil {
		return nil, err
	}
	m.Secret.Data[agent.TokenKey] = nil
	return &m, nil
}

// sayTunnelDryRun says what a join's tunnel would make, and shows the agent's manifests, their
// token left out.
func sayTunnelDryRun(out io.Writer, reg Registry, o *Options, account Account, owner map[string]string) *agent.Manifests {
	t := o.Tunnel
	fmt.Fprintf(out, "registry: would apply ServiceAccount %s/%s, the tunnel agent, dialling %s on the member, list it in Role %s, and ask for a token of it valid %s (dry run)\n",
		reg.Namespace, t.Agent, t.Destination, agent.TokensRole, o.TokenTTL)
	m := agent.ManifestsFor(agentSpec(t, account, reg.Namespace, owner), "", time.Time{})
	m.Secret.Data[agent.TokenKey] = nil
	where := "apply on the member"
	if t.Manifests != nil {
		where = "write out"
	}
	fmt.Fprintf(out, "member: would %s the tunnel agent's ServiceAccount, Secret (with its token) and Deployment %s/%s, dialling %s (dry run):\n", where, account.Namespace, agent.Name, t.Server)
	_ = writeManifests(out, m)
	return &m
}

// writeManifests writes the agent's objects as one YAML stream.
func writeManifests(w io.Writer, m agent.Manifests) error {
	for _, obj := range m.Objects() {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}

// applyObject server-side applies one of the agent's objects on the member.
func applyObject(ctx context.Context, kube kubernetes.Interface, obj metav1.Object, fieldManager string) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)}
	ns, name := obj.GetNamespace(), obj.GetName()
	switch obj.(type) {
	case *corev1.ServiceAccount:
		_, err = kube.CoreV1().ServiceAccounts(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	case *corev1.Secret:
		_, err = kube.CoreV1().Secrets(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	case *appsv1.Deployment:
		_, err = kube.AppsV1().Deployments(ns).Patch(ctx, name, types.ApplyPatchType, data, opts)
	default:
		err = fmt.Errorf("no way to apply a %T", obj)
	}
	return err
}

func kindOf(obj metav1.Object) string {
	if o, ok := obj.(runtime.Object); ok {
		return o.GetObjectKind().GroupVersionKind().Kind
	}
	return fmt.Sprintf("%T", obj)
}

// agentSecretRule lets the member's account replace its agent's token, and read nothing else of
// the agent: a renewer (package rotation) writes the new token with the account's own token.
func agentSecretRule() *rbacv1ac.PolicyRuleApplyConfiguration {
	return rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("secrets").WithVerbs("get", "update").WithResourceNames(agent.Name)
}
