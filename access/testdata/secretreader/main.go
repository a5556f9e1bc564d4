// Command secretreader is a client.authentication.k8s.io exec plugin for tests that behaves as
// SIG-Multicluster's ClusterProfile access-provider plugin of the same name does: it needs the
// cluster info (provideClusterInfo) with spec.cluster.config.clusterName, reads the Secret of that
// name from the registry named by $KUBECONFIG (in its current context's namespace), and answers
// with the Secret's token. client-go passes the plugin's standard error through, not into the
// error it returns, so for tests the plugin also writes its error to $SECRETREADER_ERROR_FILE.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "secretreader:", err)
		if path := os.Getenv("SECRETREADER_ERROR_FILE"); path != "" {
			_ = os.WriteFile(path, []byte(err.Error()), 0o600)
		}
		os.Exit(1)
	}
}

type execCredential struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Cluster *struct {
			Server string          `json:"server"`
			Config json.RawMessage `json:"config"`
		} `json:"cluster"`
	} `json:"spec"`
	Status map[string]string `json:"status,omitempty"`
}

func run() error {
	var info execCredential
	if err := json.Unmarshal([]byte(os.Getenv("KUBERNETES_EXEC_INFO")), &info); err != nil {
		return fmt.Errorf("reading KUBERNETES_EXEC_INFO: %w", err)
	}
	if info.Spec.Cluster == nil {
		return errors.New("missing ExecCredential.Spec.Cluster; set provideClusterInfo")
	}
	var config struct {
		ClusterName string `json:"clusterName"`
	}
	if len(info.Spec.Cluster.Config) > 0 {
		_ = json.Unmarshal(info.Spec.Cluster.Config, &config)
	}
	if config.ClusterName == "" {
		return errors.New("missing clusterName in ExecCredential.Spec.Cluster.Config")
	}

	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: os.Getenv("KUBECONFIG")}, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return err
	}
	namespace, _, err := loader.Namespace()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	secret, err := kube.CoreV1().Secrets(namespace).Get(context.Background(), config.ClusterName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(secret.Data["token"]) == 0 {
		return fmt.Errorf("secret %s/%s has no token", namespace, config.ClusterName)
	}
	info.Kind = "ExecCredential"
	info.Spec.Cluster = nil
	info.Status = map[string]string{"token": string(secret.Data["token"])}
	return json.NewEncoder(os.Stdout).Encode(info)
}
