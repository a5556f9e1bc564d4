package clusterprofile

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/tunnel"
)

const (
	// DefaultManagerName names this registry as the profiles' cluster manager when
	// PublishOptions.ManagerName is empty.
	DefaultManagerName = "cluster-registry"
	// DefaultAccessProvider names the access provider a profile offers when
	// PublishOptions.AccessProvider is empty: the name a consumer's provider file maps to its
	// exec plugin.
	DefaultAccessProvider = "cluster-registry"

	// PropertyClusterID is KEP-2149's property of a cluster's ID: the member's own
	// ClusterProperty of that name where it has one (status.properties), else the UID of its
	// kube-system namespace, as the health controller records it in status.clusterID.
	PropertyClusterID = "cluster.clusterset.k8s.io"
	// PropertyClusterSet is KEP-2149's property of the cluster set's ID: the Cluster's namespace.
	PropertyClusterSet = "clusterset.k8s.io"

	// ExecExtension is where a profile's access provider passes configuration to the consumer's
	// exec plugin (client-go's ExecCredential.spec.cluster.config): {"clusterName": NAME}, the
	// Cluster's name, which plugins such as cluster-inventory-api's secretreader look up.
	ExecExtension = "client.authentication.k8s.io/exec"
)

// Profile is the ClusterProfile that publishes c: same namespace and name, owned by c, labelled
// and named as the manager's. resolved is what the Resolver made of c (nil when it could not
// resolve it): its server and CA become the access provider; without it the profile offers no
// access provider, rather than one the Resolver's trust rules did not choose. A member reached
// through a tunnel offers one only with opts.TunnelProxy, its proxy-url through it.
func Profile(c *v1alpha1.Cluster, resolved *access.Resolved, opts PublishOptions) *cpv1alpha1.ClusterProfile {
	opts = opts.withDefaults()
	p := &cpv1alpha1.ClusterProfile{
		TypeMeta: metav1.TypeMeta{APIVersion: cpv1alpha1.GroupVersion.String(), Kind: "ClusterProfile"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: c.Namespace,
			Name:      c.Name,
			Labels:    map[string]string{cpv1alpha1.LabelClusterManagerKey: opts.ManagerName},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec: cpv1alpha1.ClusterProfileSpec{
			DisplayName:    c.Spec.DisplayName,
			ClusterManager: cpv1alpha1.ClusterManager{Name: opts.ManagerName},
		},
	}
	// Every time in the status comes from the Cluster, so an unchanged Cluster publishes an
	// unchanged profile: no write.
	observed := c.CreationTimestamp
	ready := c.Status.Condition(v1alpha1.ConditionReady)
	healthy := metav1.Condition{Type: cpv1alpha1.ClusterConditionControlPlaneHealthy, Status: metav1.ConditionUnknown,
		Reason: "NotProbed", Message: "no health controller has reported on the cluster yet", LastTransitionTime: c.CreationTimestamp}
	if ready != nil {
		healthy.Status, healthy.Reason, healthy.Message, healthy.LastTransitionTime = ready.Status, ready.Reason, ready.Message, ready.LastTransitionTime
		observed = ready.LastTransitionTime
	}
	p.Status.Conditions = []metav1.Condition{healthy}
	p.Status.Version.Kubernetes = c.Status.Version
	p.Status.Properties = []cpv1alpha1.Property{{Name: PropertyClusterSet, Value: c.Namespace, LastObservedTime: c.CreationTimestamp}}
	if id := clusterID(c, observed); id != nil {
		p.Status.Properties = append(p.Status.Properties, *id)
	}
	p.Status.Properties = append(p.Status.Properties, capacityProperties(c.Status.Resources)...)
	p.Status.Properties = append(p.Status.Properties, memberProperties(c.Status.Properties)...)
	tunnelled := c.Spec.KubernetesAPIEndpoints.Tunnel != nil
	if resolved != nil && resolved.Server != nil && (!tunnelled || opts.TunnelProxy != "") {
		config, _ := json.Marshal(map[string]string{"clusterName": c.Name})
		p.Status.AccessProviders = []cpv1alpha1.AccessProvider{{
			Name: opts.AccessProvider,
			Cluster: clientcmdv1.Cluster{
				Server:                   resolved.Server.String(),
				CertificateAuthorityData: resolved.Config.CAData,
				TLSServerName:            resolved.Config.ServerName,
				Extensions:               []clientcmdv1.NamedExtension{{Name: ExecExtension, Extension: runtime.RawExtension{Raw: config}}},
			},
		}}
		if tunnelled {
			p.Status.AccessProviders[0].Cluster.ProxyURL = tunnel.ProxyURL(opts.TunnelProxy, c.Namespace, c.Name)
		}
	}
	return p
}

// clusterID is the profile's cluster.clusterset.k8s.io: the ID the member gives itself in its
// own ClusterProperty of that name (status.properties), as KEP-2149 has a cluster say it;
// otherwise the kube-system UID the health controller recorded; nil before either is known.
// Only the profile takes the member's word: the registry's identity check (status.clusterID,
// IdentityChanged) stays on the UID, which a member's admin cannot choose.
func clusterID(c *v1alpha1.Cluster, observed metav1.Time) *cpv1alpha1.Property {
	for _, prop := range c.Status.Properties {
		if prop.Name == PropertyClusterID {
			return &cpv1alpha1.Property{Name: PropertyClusterID, Value: prop.Value, LastObservedTime: prop.LastObservedTime}
		}
	}
	if c.Status.ClusterID == "" {
		return nil
	}
	return &cpv1alpha1.Property{Name: PropertyClusterID, Value: c.Status.ClusterID, LastObservedTime: observed}
}

// memberProperties are the properties a member says of itself (its status.properties) that the
// profile publishes as they are: not the cluster set's (the Cluster's namespace is its set,
// whatever the member claims), nor its ID (clusterID), nor one under the registry's own
// prefixes, which the capacity properties own.
func memberProperties(props []v1alpha1.ClusterStatusProperty) []cpv1alpha1.Property {
	var out []cpv1alpha1.Property
	for _, prop := range props {
		if prop.Name == PropertyClusterSet || prop.Name == PropertyClusterID ||
			strings.HasPrefix(prop.Name, PropertyResourcePrefix) || strings.HasPrefix(prop.Name, "clusterregistry.k8s.io/") {
			continue
		}
		out = append(out, cpv1alpha1.Property{Name: prop.Name, Value: prop.Value, LastObservedTime: prop.LastObservedTime})
	}
	return out
}

// Capacity properties: a Cluster's status.resources as ClusterProfile properties (KEP-4322's
// name/value pairs), for a consumer that places on them. Each carries the figures' own
// lastObservedTime.
const (
	// PropertyNodeCount and PropertyReadyNodeCount are how many Nodes the cluster has, and how
	// many are Ready and schedulable.
	PropertyNodeCount      = "clusterregistry.k8s.io/node-count"
	PropertyReadyNodeCount = "clusterregistry.k8s.io/ready-node-count"
	// PropertyResourcePrefix prefixes, for cpu, memory and pods, allocatable-NAME (what the ready
	// Nodes offer), requested-NAME (what non-terminal Pods request) and largest-free-NAME (what is
	// free on any one Node), each a quantity ("12", "48Gi").
	PropertyResourcePrefix = "resources.clusterregistry.k8s.io/"
)

// capacityProperties are r's figures as properties; none before a capacity controller wrote
// them.
func capacityProperties(r *v1alpha1.ClusterResources) []cpv1alpha1.Property {
	if r == nil {
		return nil
	}
	at := r.LastObservedTime
	props := []cpv1alpha1.Property{
		{Name: PropertyNodeCount, Value: strconv.Itoa(int(r.Nodes)), LastObservedTime: at},
		{Name: PropertyReadyNodeCount, Value: strconv.Itoa(int(r.ReadyNodes)), LastObservedTime: at},
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		for _, fig := range []struct {
			what string
			list corev1.ResourceList
		}{{"allocatable-", r.Allocatable}, {"requested-", r.Requested}, {"largest-free-", r.LargestFree}} {
			if q, ok := fig.list[name]; ok {
				props = append(props, cpv1alpha1.Property{Name: PropertyResourcePrefix + fig.what + string(name), Value: q.String(), LastObservedTime: at})
			}
		}
	}
	return props
}

// managedBy reports whether the profile is the manager's, by its label and its spec.
func managedBy(p *cpv1alpha1.ClusterProfile, manager string) bool {
	return p.Labels[cpv1alpha1.LabelClusterManagerKey] == manager && p.Spec.ClusterManager.Name == manager
}

// profileKey names a profile in errors and logs.
func profileKey(namespace, name string) string {
	return fmt.Sprintf("ClusterProfile %s/%s", namespace, name)
}
