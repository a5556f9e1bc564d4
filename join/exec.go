package join

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/clusterapply"
)

// ExecRegistration is what Join registered with Options.Exec, and what readers need to know.
type ExecRegistration struct {
	// Command and Args are the plugin's, as the Cluster's exec provider runs them: readers must
	// allow the command with these arguments (access.ExecPlugin) and the server.
	Command string
	Args    []string
	// User is who the member knows the plugin's credentials as, here.
	User string
	// EnvNotCopied names the plugin's environment variables, which were not copied as they may
	// hold secrets: readers set them themselves.
	EnvNotCopied []string
	// DroppedArgs names the arguments left out because they pass a credential
	// (Options.DropCredentialArgs), never their values.
	DroppedArgs []string
}

// joinExec registers a member whose config authenticates with an exec plugin: the Cluster gets
// the plugin as its exec provider, and nothing is made on the member or stored in the registry
// but the Cluster.
func joinExec(ctx context.Context, member *rest.Config, server string, reg Registry, o *Options) (*Result, error) {
	namespace, out := reg.Namespace, o.Progress
	plugin := member.ExecProvider
	if plugin == nil {
		return nil, ErrNoExecPlugin
	}
	if err := checkNameFree(ctx, out, reg, o.Name, server); err != nil {
		return nil, err
	}
	memberKube, err := kubernetes.NewForConfig(member)
	if err != nil {
		return nil, err
	}
	// The plugin must work here before readers are told to run it: the member must know who it
	// authenticates, which /version (open to anyone) would not show.
	review, err := memberKube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("member: authenticating to %s with the exec plugin %s (nothing was done): %w", server, plugin.Command, err)
	}
	reg2 := &ExecRegistration{Command: plugin.Command, User: review.Status.UserInfo.Username}
	fmt.Fprintf(out, "member: %s knows the exec plugin %s's credentials as user %q\n", server, plugin.Command, reg2.User)

	provider, dropped, err := ExecProvider(plugin, o.DropCredentialArgs)
	if err != nil {
		return nil, fmt.Errorf("%w (nothing was done)", err)
	}
	reg2.DroppedArgs = dropped
	if a := provider.Config["args"]; a != "" {
		_ = json.Unmarshal([]byte(a), &reg2.Args) // written by ExecProvider
	}
	c := clusterFor(namespace, server, member.CAData, o, provider)
	if errs := v1alpha1.ValidateCluster(&c); len(errs) > 0 {
		return nil, fmt.Errorf("registry: cluster %s/%s would be invalid (nothing was done): %w", namespace, o.Name, errs.ToAggregate())
	}
	applied, what, err := clusterapply.Apply(ctx, reg.Clusters, &c, o.FieldManager, o.DryRun, true)
	if err != nil {
		return nil, fmt.Errorf("registry: applying cluster %s/%s (nothing else was done): %w", namespace, o.Name, err)
	}
	said := what
	if o.DryRun {
		said = "would be " + what + " (server dry run)"
	}
	fmt.Fprintf(out, "registry: Cluster %s/%s %s, with exec provider %s\n", namespace, o.Name, said, plugin.Command)
	for _, v := range plugin.Env {
		reg2.EnvNotCopied = append(reg2.EnvNotCopied, v.Name)
	}
	if len(reg2.EnvNotCopied) > 0 {
		fmt.Fprintf(out, "note: the plugin's environment (%s) was not copied, as it may hold secrets; readers set it themselves\n", strings.Join(reg2.EnvNotCopied, ", "))
	}
	for _, d := range dropped {
		fmt.Fprintf(out, "note: the plugin's argument %s was left out, as it passes a credential; readers give the plugin that credential themselves\n", d)
	}
	return &Result{Cluster: applied, ClusterChange: what, Exec: reg2}, nil
}

// ExecProvider is the exec provider that registers a kubeconfig user's plugin: its command, its
// args and whether it wants the cluster's info, never its environment, which may hold secrets.
// An argument that passes a credential (kubelogin's --oidc-client-secret=..., a --password and
// its value) would be copied into the registry for every reader of the cluster set to see: it is
// refused with a *CredentialArgError, or with drop left out, its flag named in dropped. Neither
// names its value.
func ExecProvider(plugin *clientcmdapi.ExecConfig, drop bool) (p v1alpha1.AuthProviderConfig, dropped []string, err error) {
	var args []string
	for i := 0; i < len(plugin.Args); i++ {
		arg := plugin.Args[i]
		quoted, _ := json.Marshal(arg) // as the argument stands in the Cluster's config
		flag := v1alpha1.CredentialArgFlag(string(quoted))
		if flag == "" {
			args = append(args, arg)
			continue
		}
		if !drop {
			return p, nil, &CredentialArgError{Flag: flag}
		}
		// In the "--flag value" form, the value is the next argument.
		if !strings.Contains(arg, "=") && i+1 < len(plugin.Args) && !strings.HasPrefix(plugin.Args[i+1], "-") {
			i++
			flag += " and its value"
		}
		dropped = append(dropped, flag)
	}
	config := map[string]string{"command": plugin.Command, "apiVersion": plugin.APIVersion}
	if len(args) > 0 {
		encoded, err := json.Marshal(args)
		if err != nil {
			return p, nil, err
		}
		config["args"] = string(encoded)
	}
	if plugin.ProvideClusterInfo {
		config["provideClusterInfo"] = "true"
	}
	return v1alpha1.AuthProviderConfig{Name: "exec", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeExec}, Config: config}, dropped, nil
}
