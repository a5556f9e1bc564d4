package main

import (
	"errors"
	"fmt"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/join"
)

// dropCredentialArgsFlag lets join --exec and import --from-kubeconfig register a plugin without
// the arguments that pass a credential, rather than refuse it.
const dropCredentialArgsFlag = "drop-credential-args"

// execProvider is join.ExecProvider, its refusal in the command's terms.
func execProvider(plugin *clientcmdapi.ExecConfig, drop bool) (v1alpha1.AuthProviderConfig, []string, error) {
	p, dropped, err := join.ExecProvider(plugin, drop)
	return p, dropped, credentialArgInFlagTerms(err)
}

// credentialArgInFlagTerms says a *join.CredentialArgError with the flag that leaves the argument
// out; other errors are returned as they are.
func credentialArgInFlagTerms(err error) error {
	var argErr *join.CredentialArgError
	if !errors.As(err, &argErr) {
		return err
	}
	return fmt.Errorf("the exec plugin's argument %s passes a credential, which the registry would show every reader of the cluster set; "+
		"give the plugin that credential on the readers' side (a file, its environment), or leave the argument out with --%s",
		argErr.Flag, dropCredentialArgsFlag)
}
