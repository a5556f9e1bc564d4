package agent

import (
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Manifests are the agent's objects on its member, in the order to apply them.
type Manifests struct {
	// ServiceAccount is the Pod's own, with no rights and no token mounted: the agent needs
	// none of the member's API, and dials it as a reader's tunnel, not as itself.
	ServiceAccount *corev1.ServiceAccount
	// Secret holds the agent's token (and when it expires) and the tunnel server's CA.
	Secret *corev1.Secret
	// Deployment runs one agent with Args.
	Deployment *appsv1.Deployment
}

// Objects lists them, in the order to apply them.
func (m Manifests) Objects() []metav1.Object {
	return []metav1.Object{m.ServiceAccount, m.Secret, m.Deployment}
}

// ManifestsFor are the agent's objects for s, with token, which expires at expires. s must be
// valid (Spec.Validate).
func ManifestsFor(s Spec, token string, expires time.Time) Manifests {
	meta := func(kind, apiVersion string) (metav1.TypeMeta, metav1.ObjectMeta) {
		return metav1.TypeMeta{Kind: kind, APIVersion: apiVersion}, metav1.ObjectMeta{
			Name: Name, Namespace: s.Namespace, Labels: map[string]string{"app.kubernetes.io/name": Name},
			Annotations: maps.Clone(s.Annotations),
		}
	}
	var m Manifests
	m.ServiceAccount = &corev1.ServiceAccount{AutomountServiceAccountToken: ptr.To(false)}
	m.ServiceAccount.TypeMeta, m.ServiceAccount.ObjectMeta = meta("ServiceAccount", "v1")
	m.Secret = &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{TokenKey: []byte(token), CAKey: s.ServerCA}}
	m.Secret.TypeMeta, m.Secret.ObjectMeta = meta("Secret", "v1")
	if m.Secret.Annotations == nil {
		m.Secret.Annotations = map[string]string{}
	}
	m.Secret.Annotations[v1alpha1.TokenExpiresAnnotation] = expires.UTC().Format(time.RFC3339)
	m.Deployment = &appsv1.Deployment{Spec: deploymentSpec(s)}
	m.Deployment.TypeMeta, m.Deployment.ObjectMeta = meta("Deployment", "apps/v1")
	return m
}

// deploymentSpec runs one agent, locked down: it reads two files and dials out.
func deploymentSpec(s Spec) appsv1.DeploymentSpec {
	labels := map[string]string{"app.kubernetes.io/name": Name}
	image := s.Image
	if image == "" {
		image = DefaultImage
	}
	container := corev1.Container{
		Name: "agent", Image: image,
		Command:      []string{"/proxy-agent"},
		Args:         append(s.Args(MountPath), "--health-server-port=8093", "--admin-server-port=8094"),
		VolumeMounts: []corev1.VolumeMount{{Name: "tunnel", MountPath: MountPath, ReadOnly: true}},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromInt32(8093),
		}}, InitialDelaySeconds: 15, TimeoutSeconds: 15},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi"),
		}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	return appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{
				ServiceAccountName: Name, AutomountServiceAccountToken: ptr.To(false),
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532)},
				Containers:      []corev1.Container{container},
				Volumes: []corev1.Volume{{Name: "tunnel", VolumeSource: corev1.VolumeSource{
					Secret: &corev1.SecretVolumeSource{SecretName: Name, DefaultMode: ptr.To[int32](0o440)},
				}}},
			},
		},
	}
}
