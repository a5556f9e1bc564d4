package health

import (
	"strings"
	"testing"
	"time"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Working credentials are expiring once less than a quarter of their life is left (or
// ExpiringWithin, or 24 hours when they do not say when they were issued); refused ones are
// expired only once their expiry has passed.
func TestJudgeExpiry(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ok := observation{ready: true, reason: v1alpha1.ReasonReachable, message: "readyz answered"}
	refused := observation{reason: v1alpha1.ReasonUnauthorized, message: "the API server refused the credentials (401)"}
	for _, tc := range []struct {
		name            string
		within          time.Duration
		o               observation
		issued, expires time.Time
		want            string
	}{
		{"no expiry", 0, ok, time.Time{}, time.Time{}, v1alpha1.ReasonReachable},
		{"8h token, 3h left", 0, ok, now.Add(-5 * time.Hour), now.Add(3 * time.Hour), v1alpha1.ReasonReachable},
		{"8h token, 1h left", 0, ok, now.Add(-7 * time.Hour), now.Add(time.Hour), v1alpha1.ReasonCredentialsExpiring},
		{"no iat, 30h left", 0, ok, time.Time{}, now.Add(30 * time.Hour), v1alpha1.ReasonReachable},
		{"no iat, 20h left", 0, ok, time.Time{}, now.Add(20 * time.Hour), v1alpha1.ReasonCredentialsExpiring},
		{"within 4h, 3h left", 4 * time.Hour, ok, now.Add(-5 * time.Hour), now.Add(3 * time.Hour), v1alpha1.ReasonCredentialsExpiring},
		{"refused, expired", 0, refused, now.Add(-2 * time.Hour), now.Add(-time.Hour), v1alpha1.ReasonCredentialsExpired},
		{"refused, in date", 0, refused, now.Add(-time.Hour), now.Add(time.Hour), v1alpha1.ReasonUnauthorized},
		{"unreachable, expired", 0, observation{reason: v1alpha1.ReasonUnreachable}, now.Add(-2 * time.Hour), now.Add(-time.Hour), v1alpha1.ReasonUnreachable},
	} {
		c := &Controller{opts: Options{ExpiringWithin: tc.within}}
		got := c.judgeExpiry(tc.o, tc.issued, tc.expires, now)
		if got.reason != tc.want {
			t.Errorf("%s: reason %s, want %s (%s)", tc.name, got.reason, tc.want, got.message)
		}
		if got.reason == v1alpha1.ReasonCredentialsExpiring && !strings.Contains(got.message, tc.expires.Format(time.RFC3339)) {
			t.Errorf("%s: the message does not say when: %s", tc.name, got.message)
		}
	}
}
