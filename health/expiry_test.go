package health_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

// setToken puts token in the member's credential Secret, as a rotator (or join again) would.
func setToken(t *testing.T, lf *localfleet.Fleet, secret, token string) {
	t.Helper()
	secrets := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(lf.Namespace)
	s, err := secrets.Get(context.Background(), secret, metav1.GetOptions{})
	require.NoError(t, err)
	s.Data["token"] = []byte(token)
	_, err = secrets.Update(context.Background(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// jwt is an unsigned token whose claims say when it was issued and expires: the API server
// refuses it, as it refuses an expired one.
func jwt(issued, expires time.Time) string {
	return jwtClaims(fmt.Sprintf(`{"iat":%d,"exp":%d,"sub":"system:serviceaccount:kube-system:gone"}`, issued.Unix(), expires.Unix()))
}

// jwtClaims is an unsigned token with the claims given.
func jwtClaims(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2ln"
}

// Credentials that expire soon make Ready say so (True, CredentialsExpiring, with the time), with
// an Event and the soonest expiry as a metric; credentials refused after their expiry are
// CredentialsExpired, not Unauthorized. No token in status or Events. Whoever writes the Secret
// cannot freeze the status either: not with an expiry no time field can hold, nor with a pinning
// annotation longer than a condition's message may be.
func TestCredentialsExpiringAndExpired(t *testing.T) {
	lf := sharedSet(t, "member-1")
	m := lf.Members[0]
	require.Equal(t, "secret", m.ProviderType)
	ctx := context.Background()
	// The shortest token a member gives, ten minutes, for localfleet's own account.
	tr, err := kubernetes.NewForConfigOrDie(m.Config).CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "localfleet-admin",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	setToken(t, lf, m.Name+"-token", tr.Status.Token)

	opts := fastOptions(lf)
	opts.ExpiringWithin = time.Hour
	reg := prometheus.NewRegistry()
	opts.Metrics = reg
	stop := start(t, opts)
	defer stop()

	c := waitFor(t, lf, m.Name, "True/CredentialsExpiring")
	expires := tr.Status.ExpirationTimestamp.UTC()
	require.Contains(t, c.Status.Condition("Ready").Message, expires.Format(time.RFC3339))
	require.NotNil(t, c.Status.CredentialsExpireAt, "status.credentialsExpireAt is not written")
	require.Equal(t, expires.Unix(), c.Status.CredentialsExpireAt.Unix())
	registry := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	requireEvent(t, registry, lf.Namespace, m.Name, "CredentialsExpiring")
	require.Eventually(t, func() bool {
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() == "clusterregistry_health_credentials_soonest_expiry_timestamp_seconds" {
				return int64(f.GetMetric()[0].GetGauge().GetValue()) == expires.Unix()
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "no soonest-expiry metric of %s", expires)

	// A token past its expiry is refused: expired, not merely refused.
	now := time.Now()
	expired := jwt(now.Add(-2*time.Hour), now.Add(-time.Hour))
	setToken(t, lf, m.Name+"-token", expired)
	c = waitFor(t, lf, m.Name, "False/CredentialsExpired")
	require.Contains(t, c.Status.Condition("Ready").Message, "expired at "+now.Add(-time.Hour).UTC().Format(time.RFC3339))
	requireEvent(t, registry, lf.Namespace, m.Name, "CredentialsExpired")
	// Attacker: whoever writes the Secret writes a token whose exp no time field can hold (the
	// year 31690708). Had it gone into status.credentialsExpireAt, every status write would fail
	// and Ready would stay CredentialsExpired, true of a token long replaced. It is taken as
	// saying nothing, as an opaque token does.
	setToken(t, lf, m.Name+"-token", jwtClaims(fmt.Sprintf(`{"iat":%d,"exp":1000000000000000}`, now.Unix())))
	c = waitFor(t, lf, m.Name, "False/Unauthorized")
	require.Nil(t, c.Status.CredentialsExpireAt, "an expiry no time field can hold")
	// A token still in date that is refused is Unauthorized, as before, and says when it expires.
	setToken(t, lf, m.Name+"-token", jwt(now, now.Add(time.Hour)))
	require.Eventually(t, func() bool {
		got, c := ready(t, lf, m.Name)
		return got == "False/Unauthorized" && c.Status.CredentialsExpireAt != nil && c.Status.CredentialsExpireAt.Unix() == now.Add(time.Hour).Unix()
	}, time.Minute, 50*time.Millisecond, "Ready is not False/Unauthorized with the token's expiry")

	// Attacker: whoever writes the Secret pins it to 2,500 servers, 65 KB that the Resolver's
	// error names. A Ready message that long would fail every status write; it is cut short.
	secrets := registry.CoreV1().Secrets(lf.Namespace)
	s, err := secrets.Get(ctx, m.Name+"-token", metav1.GetOptions{})
	require.NoError(t, err)
	s.Annotations[v1alpha1.ServersAnnotation] = strings.Repeat("https://elsewhere.example,", 2500)
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	c = waitFor(t, lf, m.Name, "False/CredentialsUnavailable")
	msg := c.Status.Condition(v1alpha1.ConditionReady).Message
	require.LessOrEqual(t, len(msg), 4096)
	require.Contains(t, msg, m.Name+"-token pins its credentials to https://elsewhere.example, ")
	require.True(t, strings.HasSuffix(msg, "..."), "where the message was cut")

	events, err := registry.CoreV1().Events(lf.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": m.Name}.String()})
	require.NoError(t, err)
	for _, e := range events.Items {
		for _, token := range []string{tr.Status.Token, expired} {
			require.False(t, strings.Contains(e.Message, token), "an Event carries a token: %s", e.Message)
			require.NotContains(t, c.Status.Condition("Ready").Message, token)
		}
	}
}
