package clusterregistry_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cluster-registry/sdk/clusterregistry"
)

// Install upgrades a CRD left by an older release, keeps what others put on it, and leaves an
// up-to-date CRD untouched however often it runs. (The test server got its CRD from Install too.)
func TestInstallUpgradesAndIsIdempotent(t *testing.T) {
	ctx := testContext(t)
	client, err := apiextensionsclient.NewForConfig(lf.Registry.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()

	// Make the installed CRD look like an older release's: no printer columns, no short name, an
	// older annotation, plus a label some other tool added.
	old, err := crds.Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old.Spec.Versions[0].AdditionalPrinterColumns = nil
	old.Spec.Names.ShortNames = nil
	old.Annotations["api-approved.kubernetes.io"] = "unapproved, an older release"
	if old.Labels == nil {
		old.Labels = map[string]string{}
	}
	old.Labels["owner"] = "someone-else"
	if _, err := crds.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := clusterregistry.Install(ctx, client); err != nil {
		t.Fatal(err)
	}
	upgraded, err := crds.Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := clusterregistry.CRD()
	if n := len(upgraded.Spec.Versions[0].AdditionalPrinterColumns); n != len(want.Spec.Versions[0].AdditionalPrinterColumns) {
		t.Errorf("printer columns not restored: %d", n)
	}
	if len(upgraded.Spec.Names.ShortNames) == 0 {
		t.Error("short name not restored")
	}
	if got := upgraded.Annotations["api-approved.kubernetes.io"]; got != want.Annotations["api-approved.kubernetes.io"] {
		t.Errorf("annotation not upgraded: %q", got)
	}
	if upgraded.Labels["owner"] != "someone-else" {
		t.Error("Install dropped a label it does not own")
	}
	if !established(upgraded) {
		t.Error("Install returned before the CRD was Established")
	}

	// The server's own controllers write the CRD's status after a spec change (accepted names);
	// wait for them so that only Install could change it from here on.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, testTimeout, true, func(ctx context.Context) (bool, error) {
		upgraded, err = crds.Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
		return err == nil && slices.Equal(upgraded.Status.AcceptedNames.ShortNames, want.Spec.Names.ShortNames), err
	})
	if err != nil {
		t.Fatalf("accepted names never caught up: %v", err)
	}

	for range 3 {
		if err := clusterregistry.Install(ctx, client); err != nil {
			t.Fatal(err)
		}
	}
	again, err := crds.Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != upgraded.ResourceVersion || again.Generation != upgraded.Generation {
		t.Errorf("Install rewrote an up-to-date CRD: resourceVersion %s -> %s", upgraded.ResourceVersion, again.ResourceVersion)
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
