package main

import (
	"encoding/json"
	"fmt"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// dropCredentialArgsFlag lets join --exec and import --from-kubeconfig register a plugin without
// the arguments that pass a credential, rather than refuse it.
const dropCredentialArgsFlag = "drop-credential-args"

// execProvider is the exec provider that registers a kubeconfig user's plugin: its command, its
// args and whether it wants the cluster's info, never its environment, which may hold secrets.
// An argument that passes a credential (kubelogin's --oidc-client-secret=..., a --password and
// its value) would be copied into the registry for every reader of the cluster set to see: it is
// refused, or with drop left out, its flag named in dropped. Neither names its value.
func execProvider(plugin *clientcmdapi.ExecConfig, drop bool) (p v1alpha1.AuthProviderConfig, dropped []string, err error) {
	var args []string
	for i := 0; i < len(plugin.Args); i++ {
		arg := plugin.Args[i]
		quoted, _ := json.Marshal(arg) // as the argument stands in the Cluster's config
		flag := v1alpha1.CredentialArgFlag(string(quoted))
		if flag == "" {
			args = append(args, arg)
			continue
		}
		if !drop {
			return p, nil, fmt.Errorf("the exec plugin's argument %s passes a credential, which the registry would show every reader of the cluster set; "+
				"give the plugin that credential on the readers' side (a file, its environment), or leave the argument out with --%s",
				flag, dropCredentialArgsFlag)
		}
		// In the "--flag value" form, the value is the next argument.
		if !strings.Contains(arg, "=") && i+1 < len(plugin.Args) && !strings.HasPrefix(plugin.Args[i+1], "-") {
			i++
			flag += " and its value"
		}
		dropped = append(dropped, flag)
	}
	config := map[string]string{"command": plugin.Command, "apiVersion": plugin.APIVersion}
	if len(args) > 0 {
		encoded, err := json.Marshal(args)
		if err != nil {
			return p, nil, err
		}
		config["args"] = string(encoded)
	}
	if plugin.ProvideClusterInfo {
		config["provideClusterInfo"] = "true"
	}
	return v1alpha1.AuthProviderConfig{Name: "exec", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeExec}, Config: config}, dropped, nil
}
