package execcredential

import (
	"encoding/json"
	"errors"
	"fmt"

	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
)

// InfoEnv is where client-go gives an exec plugin its request.
const InfoEnv = "KUBERNETES_EXEC_INFO"

// ErrNoClusterInfo is ParseRequest's answer to a request that does not say which server the
// client will call: the kubeconfig's exec entry lacks provideClusterInfo: true. Without it no
// answer can be checked against the server, so none is given.
var ErrNoClusterInfo = errors.New("the client did not say which server it will call; set provideClusterInfo: true in the kubeconfig's exec entry")

// ParseRequest reads a client's request (the ExecCredential in $KUBERNETES_EXEC_INFO), of
// client.authentication.k8s.io v1 or v1beta1, which must say which server the client will call.
func ParseRequest(info []byte) (*clientauthv1.ExecCredential, error) {
	var req clientauthv1.ExecCredential
	if err := json.Unmarshal(info, &req); err != nil {
		return nil, fmt.Errorf("%s is not an ExecCredential: %w", InfoEnv, err)
	}
	switch req.APIVersion {
	case "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1":
	default:
		return nil, fmt.Errorf("%s: apiVersion %q is not one this plugin answers (client.authentication.k8s.io/v1 or v1beta1)", InfoEnv, req.APIVersion)
	}
	if req.Spec.Cluster == nil {
		return nil, ErrNoClusterInfo
	}
	return &req, nil
}
