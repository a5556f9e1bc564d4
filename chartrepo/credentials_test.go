package chartrepo_test

import (
	"encoding/base64"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A Secret's credentials go only where the Secret says: whoever writes the Release chooses the
// repository's URL, not where the credentials may go.
func TestCredentialsFromSecretGoOnlyWhereTheSecretSays(t *testing.T) {
	docker := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pull"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{
			"registry.example.com": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("robot:tok3n-value")) + `"},
			"https://charts.example.com:8443": {"username": "u", "password": "p4ss-value"}}}`)},
	}
	c, err := chartrepo.CredentialsFromSecret(docker, "oci://registry.example.com/charts/web")
	require.NoError(t, err)
	require.Equal(t, "robot", c.Username)
	require.Equal(t, "tok3n-value", c.Password)
	require.NotContains(t, c.String(), "tok3n-value")
	c, err = chartrepo.CredentialsFromSecret(docker, "https://charts.example.com:8443/stable")
	require.NoError(t, err)
	require.Equal(t, "u", c.Username)

	for _, url := range []string{"oci://evil.example.net/charts/web", "https://charts.example.com/stable", "oci://registry.example.com:5000/x"} {
		_, err = chartrepo.CredentialsFromSecret(docker, url)
		require.Error(t, err, url)
		require.ErrorContains(t, err, "team-a/pull")
		require.NotContains(t, err.Error(), "tok3n-value")
		require.NotContains(t, err.Error(), "p4ss-value")
	}

	basic := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "basic"},
		Type:       corev1.SecretTypeBasicAuth,
		Data:       map[string][]byte{"username": []byte("reader"), "password": []byte("p4ss-value")},
	}
	// Unpinned: refused, as a member's credential Secret that names no servers is.
	_, err = chartrepo.CredentialsFromSecret(basic, "https://charts.example.com")
	var pe *access.PinningError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, "team-a/basic", pe.Secret)

	basic.Annotations = map[string]string{v1alpha1.ServersAnnotation: "https://charts.example.com, oci://registry.example.com"}
	c, err = chartrepo.CredentialsFromSecret(basic, "https://charts.example.com/stable")
	require.NoError(t, err)
	require.Equal(t, "reader", c.Username)
	_, err = chartrepo.CredentialsFromSecret(basic, "oci://registry.example.com/charts/web")
	require.NoError(t, err)
	for _, url := range []string{"http://charts.example.com", "https://charts.example.com.evil.net", "https://evil.net/charts.example.com"} {
		_, err = chartrepo.CredentialsFromSecret(basic, url)
		require.True(t, errors.As(err, &pe), url)
		require.NotContains(t, err.Error(), "p4ss-value")
	}

	opaque := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "opaque"}, Type: corev1.SecretTypeOpaque}
	_, err = chartrepo.CredentialsFromSecret(opaque, "https://charts.example.com")
	require.ErrorContains(t, err, "kubernetes.io/basic-auth")
}
