package tunnel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// revoked reviews a connected agent's token again every AgentRecheck, and when it expires, until
// ctx ends, and sends the error of the first review that finds it no longer its agent's: the
// registry no longer authenticates it (its ServiceAccount was deleted, as unjoin does, or it
// expired) or names another ServiceAccount. A review the registry cannot answer keeps the agent:
// a registry outage must not cut every member off.
func (s *Server) revoked(ctx context.Context, token string, id *agentIdentity) <-chan error {
	out := make(chan error, 1)
	expires, hasExpiry := tokenExpiry(token)
	go func() {
		for {
			wait := s.opts.AgentRecheck
			if hasExpiry {
				wait = min(wait, time.Until(expires)+time.Second)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			now, err := s.review(ctx, token)
			switch {
			case err != nil && status.Code(err) == codes.Unavailable:
				continue
			case err != nil:
				out <- err
				return
			case now.host != id.host:
				out <- status.Errorf(codes.PermissionDenied, "tunnel agent's token now names %s, not %s", now.host, id.host)
				return
			}
		}
	}()
	return out
}

// tokenExpiry reads a JWT's exp claim, unverified (the registry verified the token), so that a
// token is reviewed again when it expires; false when it has none.
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == 0 {
		return time.Time{}, false
	}
	return time.Unix(claims.Exp, 0), true
}
