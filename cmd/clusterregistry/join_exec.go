package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/trustflags"
)

// joinExec registers a member whose context authenticates with an exec plugin: the Cluster gets
// the plugin as its exec provider, and nothing is made on the member or stored in the registry
// but the Cluster.
func joinExec(ctx context.Context, out io.Writer, reg *registry, context string, member *rest.Config, server string, o joinOptions) (*v1alpha1.Cluster, error) {
	namespace := reg.Namespace
	plugin := member.ExecProvider
	if plugin == nil {
		return nil, fmt.Errorf("context %q: its user runs no exec plugin, so there is nothing for --exec to register; join it without --exec to copy a token", context)
	}
	if err := checkNameFree(ctx, out, reg, o.name, server); err != nil {
		return nil, err
	}
	if len(member.CAData) == 0 {
		return nil, errors.New("member: the context's cluster has no certificate-authority-data; join needs the CA to verify the member")
	}
	memberKube, err := kubernetes.NewForConfig(member)
	if err != nil {
		return nil, err
	}
	// The plugin must work here before readers are told to run it: the member must know who it
	// authenticates, which /version (open to anyone) would not show.
	review, err := memberKube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("member: authenticating to %s with context %q's exec plugin (nothing was done): %w", server, context, err)
	}
	fmt.Fprintf(out, "member: %s knows the exec plugin %s's credentials as user %q\n", server, plugin.Command, review.Status.UserInfo.Username)

	provider, dropped, err := execProvider(plugin, o.dropCredentialArgs)
	if err != nil {
		return nil, fmt.Errorf("context %q: %w (nothing was done)", context, err)
	}
	c := joinedCluster(namespace, server, member.CAData, o, provider)
	if errs := v1alpha1.ValidateCluster(&c); len(errs) > 0 {
		return nil, fmt.Errorf("registry: cluster %s/%s would be invalid (nothing was done): %w", namespace, o.name, errs.ToAggregate())
	}
	applied, what, err := applyCluster(ctx, reg.Clusters, &c, o.dryRun, true)
	if err != nil {
		return nil, fmt.Errorf("registry: applying cluster %s/%s (nothing else was done): %w", namespace, o.name, err)
	}
	if o.dryRun {
		what = "would be " + what + " (server dry run)"
	}
	fmt.Fprintf(out, "registry: Cluster %s/%s %s, with exec provider %s\n", namespace, o.name, what, plugin.Command)
	if len(plugin.Env) > 0 {
		var names []string
		for _, v := range plugin.Env {
			names = append(names, v.Name)
		}
		fmt.Fprintf(out, "note: the plugin's environment (%s) was not copied, as it may hold secrets; readers set it themselves\n", strings.Join(names, ", "))
	}
	for _, d := range dropped {
		fmt.Fprintf(out, "note: the plugin's argument %s was left out, as it passes a credential; readers give the plugin that credential themselves\n", d)
	}
	var args []string
	if a := provider.Config["args"]; a != "" {
		_ = json.Unmarshal([]byte(a), &args) // written above
	}
	allow, ok := trustflags.AllowExecArgsFor(plugin.Command, args)
	if !ok {
		allow = "--" + trustflags.FlagAllowExecArgs + " with a pattern that fits its arguments"
	}
	fmt.Fprintf(out, "note: readers run the plugin only if they allow it with these arguments and this server: %s --%s=%s\n", allow, trustflags.FlagSendTo, server)
	return applied, nil
}
