package tunnel

import (
	"encoding/base64"
	"testing"
	"time"
)

// A token's expiry is read from its exp claim, so that an agent is reviewed again when its token
// expires; a token without one (or not a JWT) is reviewed at AgentRecheck alone.
func TestTokenExpiry(t *testing.T) {
	jwt := func(payload string) string {
		return "e30." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
	}
	for _, tc := range []struct {
		token string
		want  time.Time
		ok    bool
	}{
		{jwt(`{"exp":1800000000,"sub":"system:serviceaccount:fleet:edge-agent"}`), time.Unix(1800000000, 0), true},
		{jwt(`{"sub":"x"}`), time.Time{}, false},
		{jwt(`not json`), time.Time{}, false},
		{"opaque-token", time.Time{}, false},
		{"a.%%%.b", time.Time{}, false},
	} {
		got, ok := tokenExpiry(tc.token)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("tokenExpiry(%q) = %v, %v; want %v, %v", tc.token, got, ok, tc.want, tc.ok)
		}
	}
}
