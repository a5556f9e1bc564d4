package execcredential

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"

	"github.com/cluster-registry/sdk/access"
)

// MaxLifetime bounds how long a client may keep an answer before asking again, so that a
// long-running client reads the registry again: an unjoined member, a rotated Secret or a moved
// endpoint takes effect within it.
const MaxLifetime = 5 * time.Minute

// TargetError is Answer's refusal: the client is about to call another server than the one the
// credentials were resolved for, or to verify it otherwise (another CA or server name, or not at
// all). Its message says which, and never holds a credential.
type TargetError struct{ Reason string }

func (e *TargetError) Error() string { return "refused: " + e.Reason }

// Answer is the ExecCredential that answers req with the credentials of a, resolved for a
// member: a bearer token or a client certificate, expiring within MaxLifetime (sooner if the
// credential itself does). It is refused with a *TargetError unless req's client will call a's
// server and verify it as a would: a kubeconfig edited, handed over, or older than a change of
// the Cluster's endpoint cannot send the member's credentials anywhere else.
func Answer(ctx context.Context, req *clientauthv1.ExecCredential, a *access.Resolved) (*clientauthv1.ExecCredential, error) {
	if req.Spec.Cluster == nil {
		return nil, ErrNoClusterInfo
	}
	if err := checkTarget(a, req.Spec.Cluster); err != nil {
		return nil, err
	}
	status, err := material(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", a.Provider, err)
	}
	return &clientauthv1.ExecCredential{TypeMeta: metav1.TypeMeta{APIVersion: req.APIVersion, Kind: "ExecCredential"}, Status: status}, nil
}

// checkTarget refuses unless the client will call the server the credentials were resolved for,
// and verify it as the Resolver would: by the same CA and server name, never without verifying.
func checkTarget(a *access.Resolved, to *clientauthv1.Cluster) error {
	server, err := access.ServerURL(to.Server)
	if err != nil {
		return &TargetError{fmt.Sprintf("the client's server: %v", err)}
	}
	if server.String() != a.Server.String() {
		return &TargetError{fmt.Sprintf("the credentials are for %s, but the client is about to call %s; "+
			"the kubeconfig is out of date or was not written for this registry: export it again", a.Server, redacted(to.Server))}
	}
	if to.InsecureSkipTLSVerify {
		return &TargetError{fmt.Sprintf("the kubeconfig skips verifying %s (insecure-skip-tls-verify); remove it, or export the kubeconfig again", a.Server)}
	}
	if !bytes.Equal(bytes.TrimSpace(to.CertificateAuthorityData), bytes.TrimSpace(a.Config.CAData)) {
		return &TargetError{fmt.Sprintf("the client would verify %s with another certificate authority than the registry gives for it; export the kubeconfig again", a.Server)}
	}
	if to.TLSServerName != a.Config.ServerName {
		return &TargetError{fmt.Sprintf("the client would check %s's certificate for the name %q, the registry for %q; export the kubeconfig again", a.Server, to.TLSServerName, a.Config.ServerName)}
	}
	return nil
}

// redacted is a server address without any user info it may carry.
func redacted(address string) string {
	u, err := url.Parse(address)
	if err != nil {
		return "(an address that does not parse)"
	}
	u.User = nil
	return u.String()
}
