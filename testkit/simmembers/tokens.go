package simmembers

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// What a Rotator asks of a member, simulated: make a Secret to bind a token to, ask for a token
// of a service account, list the binding Secrets and delete them. Every simulated member accepts
// the tokens it issues (IssuedToken); revocation is not simulated. Request bodies are not read:
// a token lives TokenTTL, and its account is the one of its request's path.

// TokenTTL is the life of the tokens simulated members issue.
const TokenTTL = time.Hour

// IssuedToken returns a token as simulated members issue them: a JWT (not signed) with iat,
// exp and the binding claims of a service-account token, which every simulated member accepts.
func IssuedToken(namespace, account, binding string, issued time.Time) string {
	claims, _ := json.Marshal(map[string]any{
		"iat": issued.Unix(), "exp": issued.Add(TokenTTL).Unix(),
		"kubernetes.io": map[string]any{"namespace": namespace,
			"serviceaccount": map[string]string{"name": account},
			"secret":         map[string]string{"name": binding}},
	})
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString(claims) + ".sim"
}

// authorized reports whether auth carries Token or a token a simulated member issued.
func authorized(auth string) bool {
	return auth == "Bearer "+Token || (strings.HasPrefix(auth, "Bearer ") && strings.HasSuffix(auth, ".sim"))
}

// tokens answers the Rotator's requests, or reports that path is not one of them.
func (m *member) tokens(method, path, query string) (status int, contentType, body string, ok bool) {
	const json = "application/json"
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/") // api v1 namespaces NS secrets [NAME]
	if len(parts) < 5 || parts[0] != "api" || parts[1] != "v1" || parts[2] != "namespaces" {
		return 0, "", "", false
	}
	ns := parts[3]
	switch {
	case parts[4] == "secrets" && len(parts) == 5 && method == http.MethodPost:
		m.mu.Lock()
		m.bindings++
		name := fmt.Sprintf("token-binding-%d", m.bindings)
		m.bound[ns] = append(m.bound[ns], name)
		m.mu.Unlock()
		return http.StatusCreated, json, secretJSON(ns, name), true
	case parts[4] == "secrets" && len(parts) == 5 && method == http.MethodGet:
		m.mu.Lock()
		items := make([]string, len(m.bound[ns]))
		for i, name := range m.bound[ns] {
			items[i] = secretJSON(ns, name)
		}
		m.mu.Unlock()
		return http.StatusOK, json, `{"kind":"SecretList","apiVersion":"v1","metadata":{},"items":[` + strings.Join(items, ",") + `]}`, true
	case parts[4] == "secrets" && len(parts) == 6 && method == http.MethodDelete:
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, name := range m.bound[ns] {
			if name == parts[5] {
				m.bound[ns] = append(m.bound[ns][:i], m.bound[ns][i+1:]...)
				return http.StatusOK, json, `{"kind":"Status","apiVersion":"v1","status":"Success"}`, true
			}
		}
		return http.StatusNotFound, json, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, true
	case parts[4] == "serviceaccounts" && len(parts) == 7 && parts[6] == "token" && method == http.MethodPost:
		m.mu.Lock()
		binding := ""
		if n := len(m.bound[ns]); n > 0 {
			binding = m.bound[ns][n-1]
		}
		m.mu.Unlock()
		now := time.Now()
		return http.StatusCreated, json, fmt.Sprintf(`{"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1","spec":{},"status":{"token":%q,"expirationTimestamp":%q}}`,
			IssuedToken(ns, parts[5], binding, now), now.Add(TokenTTL).UTC().Format(time.RFC3339)), true
	}
	return 0, "", "", false
}

// secretJSON is a binding Secret as the Rotator made it: labelled, and naming the account sim of
// its namespace.
func secretJSON(ns, name string) string {
	return fmt.Sprintf(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":%q,"namespace":%q,"uid":%q,`+
		`"labels":{"clusterregistry.k8s.io/token-binding":"true"},"annotations":{"clusterregistry.k8s.io/service-account":%q}},"type":"Opaque"}`,
		name, ns, "uid-"+name, ns+"/sim")
}
