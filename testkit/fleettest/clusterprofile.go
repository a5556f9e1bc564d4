package fleettest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// InventoryModule is the directory where the go command keeps the cluster-inventory-api module
// this one requires: its CRD and plugins come from there, as its users install them.
func InventoryModule() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-inventory-api").Output()
	if err != nil {
		return "", fmt.Errorf("finding the cluster-inventory-api module: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// InstallClusterProfileCRD installs cluster-inventory-api's own ClusterProfile CRD in the server
// config reaches, and waits for it to be served.
func InstallClusterProfileCRD(ctx context.Context, config *rest.Config) error {
	return installInventoryCRD(ctx, config, "multicluster.x-k8s.io_clusterprofiles.yaml")
}

// InstallPlacementDecisionCRD installs cluster-inventory-api's own PlacementDecision CRD in the
// server config reaches, and waits for it to be served.
func InstallPlacementDecisionCRD(ctx context.Context, config *rest.Config) error {
	return installInventoryCRD(ctx, config, "multicluster.x-k8s.io_placementdecisions.yaml")
}

// installInventoryCRD installs a CRD of cluster-inventory-api's config/crd/bases, by file name.
func installInventoryCRD(ctx context.Context, config *rest.Config, file string) error {
	dir, err := InventoryModule()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(dir, "config", "crd", "bases", file))
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return err
	}
	client := apiextensionsclient.NewForConfigOrDie(config).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := client.Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := client.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
