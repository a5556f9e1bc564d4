package clusterprofile

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	cpaccess "sigs.k8s.io/cluster-inventory-api/pkg/access"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// Consuming: ClusterProfiles of any cluster manager, made into Clusters that a Fleet follows
// (multicluster.NewFleetFrom(clusterprofile.NewSource(...), resolver, opts)), so fan-out, the
// caches and the multicluster-runtime provider work over an inventory this registry did not
// write. Each profile is reached as cluster-inventory-api's access package reaches it: the first
// access provider, in the provider file's order, that the profile offers names the exec plugin
// that gives the credentials. Unlike that package, the Resolver's trust rules apply: the plugin
// runs only from ExecPlugins (the provider file's own commands, args and env: a profile's
// additional-args and additional-envs extensions are not passed), its credentials go only to
// servers its SendTo allows and, request by request, only to the profile's server; a profile's
// proxy is not used.

// ExecPlugins are the Resolver's ExecPlugins for the plugins of a cluster-inventory-api provider
// file (cpaccess.NewFromFile): each runs with the file's own args and env, and its credentials
// may go to the servers sendTo allows; a profile's writer chooses the server, so sendTo is
// required (access.Servers lists them; access.AnyServer trusts every profile writer). Each plugin
// is sent {"clusterName": <the profile's name>} as its cluster config, as cluster-inventory-api's
// secretreader expects: the profile's own name, not one its writer chose, so one cluster's
// credentials are not asked for on another's behalf.
func ExecPlugins(providers *cpaccess.Config, sendTo access.ServerMatcher) ([]access.ExecPlugin, error) {
	if sendTo == nil {
		return nil, fmt.Errorf("clusterprofile: ExecPlugins needs sendTo: the servers the plugins' credentials may go to")
	}
	var plugins []access.ExecPlugin
	for i, p := range providers.Providers {
		if p.ExecConfig == nil || p.ExecConfig.Command == "" {
			return nil, fmt.Errorf("clusterprofile: provider %d (%q) has no execConfig.command", i+1, p.Name)
		}
		env := map[string]string{}
		for _, e := range p.ExecConfig.Env {
			env[e.Name] = e.Value
		}
		plugins = append(plugins, access.ExecPlugin{
			Command:       p.ExecConfig.Command,
			Args:          p.ExecConfig.Args,
			Env:           env,
			ClusterConfig: access.ClusterNameConfig,
			InstallHint:   p.ExecConfig.InstallHint,
			SendTo:        sendTo,
		})
	}
	return plugins, nil
}

// ClusterOf is the Cluster that stands for profile in a Fleet: same namespace, name and labels,
// its display name, Ready from ControlPlaneHealthy, its version, and the server, CA and exec
// plugin of the first access provider, in providers' order, that the profile offers. A profile
// that offers none of them is a Cluster with no endpoint, which the Resolver reports as such.
func ClusterOf(profile *cpv1alpha1.ClusterProfile, providers *cpaccess.Config) *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: profile.Namespace, Name: profile.Name, UID: profile.UID, Labels: profile.Labels,
			ResourceVersion: profile.ResourceVersion, Generation: profile.Generation, CreationTimestamp: profile.CreationTimestamp,
			DeletionTimestamp: profile.DeletionTimestamp,
		},
		Spec: v1alpha1.ClusterSpec{DisplayName: profile.Spec.DisplayName},
	}
	c.Status.Version = profile.Status.Version.Kubernetes
	if healthy := meta.FindStatusCondition(profile.Status.Conditions, cpv1alpha1.ClusterConditionControlPlaneHealthy); healthy != nil {
		c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: healthy.Status, Reason: healthy.Reason,
			Message: healthy.Message, LastTransitionTime: healthy.LastTransitionTime})
	}
	for _, prop := range profile.Status.Properties {
		if prop.Name == PropertyClusterID {
			c.Status.ClusterID = prop.Value
		}
	}
	offered := map[string]*cpv1alpha1.AccessProvider{}
	for i := range profile.Status.CredentialProviders { // deprecated, and overridden by AccessProviders
		offered[profile.Status.CredentialProviders[i].Name] = &profile.Status.CredentialProviders[i]
	}
	for i := range profile.Status.AccessProviders {
		offered[profile.Status.AccessProviders[i].Name] = &profile.Status.AccessProviders[i]
	}
	for _, p := range providers.Providers {
		ap, ok := offered[p.Name]
		if !ok || p.ExecConfig == nil || ap.Cluster.Server == "" {
			continue
		}
		c.Spec.KubernetesAPIEndpoints = v1alpha1.KubernetesAPIEndpoints{
			ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: ap.Cluster.Server}},
			CABundle:        ap.Cluster.CertificateAuthorityData,
		}
		config := map[string]string{"command": p.ExecConfig.Command, "provideClusterInfo": strconv.FormatBool(p.ExecConfig.ProvideClusterInfo)}
		if p.ExecConfig.APIVersion != "" {
			config["apiVersion"] = p.ExecConfig.APIVersion
		}
		c.Spec.AuthInfo.Providers = []v1alpha1.AuthProviderConfig{{Name: p.Name, Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeExec}, Config: config}}
		break
	}
	return c
}

// NewSource is the ClusterProfiles that profiles lists and watches, as Clusters (ClusterOf), for
// multicluster.NewFleetFrom. FleetOptions.Selector selects profiles by their labels: for example
// x-k8s.io/cluster-manager to follow one cluster manager's.
func NewSource(profiles cpversioned.Interface, providers *cpaccess.Config) multicluster.ClusterSource {
	return &source{profiles: profiles, providers: providers}
}

type source struct {
	profiles  cpversioned.Interface
	providers *cpaccess.Config
}

func (s *source) List(ctx context.Context, namespace string, opts metav1.ListOptions) (*v1alpha1.ClusterList, error) {
	list, err := s.profiles.ApisV1alpha1().ClusterProfiles(namespace).List(ctx, opts)
	if apierrors.IsNotFound(err) {
		if served := Served(s.profiles.Discovery()); served != nil {
			return nil, served // saying what to install, not only "not found"
		}
	}
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.ClusterList{ListMeta: list.ListMeta, Items: make([]v1alpha1.Cluster, 0, len(list.Items))}
	for i := range list.Items {
		out.Items = append(out.Items, *ClusterOf(&list.Items[i], s.providers))
	}
	return out, nil
}

func (s *source) Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := s.profiles.ApisV1alpha1().ClusterProfiles(namespace).Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if p, ok := ev.Object.(*cpv1alpha1.ClusterProfile); ok {
			ev.Object = ClusterOf(p, s.providers)
		}
		return ev, true
	}), nil
}
