package v1alpha1_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A tool checks a Cluster before it sends it, and reports every problem with the field it is in.
// Values that could be secret are not repeated back.
func ExampleValidateCluster() {
	c := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-7", Namespace: "fleet"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
					{ClientCIDR: "10.0.0.0/8", ServerAddress: "https://admin:hunter2@edge-7.example.com"},
				},
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{
				Name:   "ci",
				Type:   v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret},
				Config: map[string]string{"name": "edge-7-token", "token": "hunter2"},
			}}},
		},
	}
	for _, err := range v1alpha1.ValidateCluster(c) {
		fmt.Println(err)
	}
	// Output:
	// spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress: Invalid value: serverAddress must be an https URL (https://host[:port][/path]) or host[:port]; other schemes, user info, query and fragment are not allowed
	// spec.authInfo.providers[0].config[token]: Forbidden: config key "token" names a credential; config holds pointers to credentials (a Secret's name, a file's path), not credentials
}

// Controllers that probe members record what they saw as conditions; readers ask IsReady.
func ExampleClusterStatus_SetCondition() {
	c := &v1alpha1.Cluster{}
	c.Status.SetCondition(metav1.Condition{
		Type:    v1alpha1.ConditionReady,
		Status:  metav1.ConditionTrue,
		Reason:  v1alpha1.ReasonReachable,
		Message: "GET /version answered v1.36.3",
	})
	fmt.Println(c.IsReady(), c.Status.Condition(v1alpha1.ConditionReady).Reason)
	// Output: true Reachable
}

// Ready has three states: True, False, and not known yet (no condition, or Unknown). A tool that
// skips unhealthy members skips only those known to be down.
func ExampleCluster_IsNotReady() {
	up, down, fresh := &v1alpha1.Cluster{}, &v1alpha1.Cluster{}, &v1alpha1.Cluster{}
	up.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReachable})
	down.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnreachable})
	for _, c := range []*v1alpha1.Cluster{up, down, fresh} {
		fmt.Printf("ready=%t notReady=%t\n", c.IsReady(), c.IsNotReady())
	}
	// Output:
	// ready=true notReady=false
	// ready=false notReady=true
	// ready=false notReady=false
}

// Provider config holds pointers only. IsCredentialKey is the rule both ValidateCluster and the
// server apply to config keys, for tools that build configs from user input.
func ExampleIsCredentialKey() {
	for _, key := range []string{"name", "path", "secretName", "token", "client-key-data", "apiToken", "secretAccessKey"} {
		fmt.Println(key, v1alpha1.IsCredentialKey(key))
	}
	// Output:
	// name false
	// path false
	// secretName false
	// token true
	// client-key-data true
	// apiToken true
	// secretAccessKey true
}
