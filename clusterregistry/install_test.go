package clusterregistry_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

	if res, err := clusterregistry.Install(ctx, client); err != nil || res.Of(clusterregistry.CRDName).Action != clusterregistry.Upgraded ||
		res.Of(clusterregistry.PlacementCRDName).Action != clusterregistry.Unchanged {
		t.Fatalf("Install() = %v, %v; want it to upgrade the Cluster CRD only", res, err)
	}
	upgraded, err := crds.Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := clusterregistry.CRD()
	checkUpgraded(t, upgraded, want)

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
		res, err := clusterregistry.Install(ctx, client)
		if err != nil || len(res) != len(clusterregistry.CRDs()) {
			t.Fatalf("Install() = %v, %v; want a result for each CRD", res, err)
		}
		for _, r := range res {
			if r.Action != clusterregistry.Unchanged {
				t.Fatalf("Install() = %v; want it to leave the CRDs unchanged", res)
			}
		}
	}
	again, err := crds.Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The server's controllers may still touch the status; Install (which said Unchanged) must not
	// have touched the spec.
	if again.Generation != upgraded.Generation {
		t.Errorf("Install rewrote an up-to-date CRD: generation %d -> %d", upgraded.Generation, again.Generation)
	}
}

// checkUpgraded fails unless Install made the CRD upgraded what want is (printer columns, short
// names, its annotation), kept a label it does not own, and waited until it was Established.
func checkUpgraded(t *testing.T, upgraded, want *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
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
}

// Install never downgrades: a CRD from a newer SDK stays as it is, one from an older SDK (or from
// before schema versions were recorded) is upgraded, and an equal one is left alone.
func TestInstallNeverDowngrades(t *testing.T) {
	ctx := testContext(t)
	client, err := apiextensionsclient.NewForConfig(lf.Registry.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	t.Cleanup(func() { _, _ = clusterregistry.Install(context.Background(), client) })

	// setInstalled makes the registry's CRD look as if an SDK with schema version v installed it,
	// with a schema that differs from this SDK's (no printer columns).
	setInstalled := func(v string) *apiextensionsv1.CustomResourceDefinition {
		t.Helper()
		crd, err := crds.Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		crd.Spec.Versions[0].AdditionalPrinterColumns = nil
		if v == "" {
			delete(crd.Annotations, clusterregistry.SchemaVersionAnnotation)
		} else {
			crd.Annotations[clusterregistry.SchemaVersionAnnotation] = v
		}
		if crd, err = crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return crd
	}
	newer := strconv.Itoa(clusterregistry.SchemaVersion + 1)
	for _, tc := range []struct {
		name, installed string
		want            clusterregistry.InstallAction
		found           int
	}{
		{"new over old", strconv.Itoa(clusterregistry.SchemaVersion - 1), clusterregistry.Upgraded, clusterregistry.SchemaVersion - 1},
		{"new over one from before versions", "", clusterregistry.Upgraded, 0},
		{"old over new", newer, clusterregistry.KeptNewer, clusterregistry.SchemaVersion + 1},
		{"equal, changed by hand", strconv.Itoa(clusterregistry.SchemaVersion), clusterregistry.Upgraded, clusterregistry.SchemaVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := setInstalled(tc.installed)
			all, err := clusterregistry.Install(ctx, client)
			if err != nil {
				t.Fatal(err)
			}
			res := all.Of(clusterregistry.CRDName)
			if res.Action != tc.want || res.Found != tc.found {
				t.Errorf("Install() = %+v, want %s with found version %d", res, tc.want, tc.found)
			}
			after, err := crds.Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			columns := len(after.Spec.Versions[0].AdditionalPrinterColumns)
			if tc.want == clusterregistry.KeptNewer {
				if after.Generation != before.Generation || columns != 0 || after.Annotations[clusterregistry.SchemaVersionAnnotation] != newer {
					t.Errorf("Install changed a newer CRD: generation %d -> %d", before.Generation, after.Generation)
				}
				if !strings.Contains(res.String(), "newer than this SDK's") {
					t.Errorf("the result does not say why the CRD was kept: %s", res)
				}
				return
			}
			if columns == 0 || after.Annotations[clusterregistry.SchemaVersionAnnotation] != strconv.Itoa(clusterregistry.SchemaVersion) {
				t.Errorf("Install did not restore this SDK's CRD (version %q, %d columns)",
					after.Annotations[clusterregistry.SchemaVersionAnnotation], columns)
			}
		})
	}
	if res, err := clusterregistry.Install(ctx, client); err != nil || res.Of(clusterregistry.CRDName).Action != clusterregistry.Unchanged {
		t.Errorf("equal: Install() = %v, %v; want Unchanged", res, err)
	}
}

// The CRD records SchemaVersion, and a change to the schema must raise it: otherwise an SDK with
// the older schema and the same version would replace the newer CRD on every start.
func TestSchemaVersionIsRaisedWithTheSchema(t *testing.T) {
	crds := clusterregistry.CRDs()
	sum := sha256.New()
	for i, crd := range crds {
		if got := crd.Annotations[clusterregistry.SchemaVersionAnnotation]; got != strconv.Itoa(clusterregistry.SchemaVersion) {
			t.Fatalf("CRD %s records schema version %q, SchemaVersion is %d: edit the markers in clusterregistry/v1alpha1", crd.Name, got, clusterregistry.SchemaVersion)
		}
		spec, err := json.Marshal(crd.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			sum.Write(spec) // up to version 4, the one CRD's spec
			continue
		}
		sum.Write([]byte("\n---\n"))
		sum.Write(spec)
	}
	digest := fmt.Sprintf("%x", sum.Sum(nil))
	// One digest per schema version; add a line when you raise SchemaVersion.
	digests := map[int]string{
		1:  "df573e6fcccd2ad028aa33824161a81ed08d4a166e58592789d904f53197d804",
		2:  "bbcf16fd096ca4f26846c6dcf8a2c5d6a07b461c05dcff90d2994aad80ba5d67", // status.clusterID; Reason and Last Probe columns
		3:  "6989b6c943d26c1b39cb8985f32d4c069cdfde2afa80ffbb49ccf34d2702d677", // exec args that pass a credential are refused; the Last Report column
		4:  "b26e8961fb8626229810179277fce7ea47c7c01454561411c6f9ef662547c8b5", // status.credentialsExpireAt and its column
		5:  "c253e53e93d489a0f040910dfbc66c116352c7ac64352cb07820c0e73de60dce", // the Placement CRD
		6:  "5d0402eb2f130209b00ffe9ef65044fe36a2e63704d61a70b2323595bf7bfc67", // the Release and ReleaseStatusSlice CRDs
		7:  "24bb79a2a686c548ec825796115a557f716ac8ba2254e7cc33901d20ba81f553", // a Release's chart source
		8:  "cd83ae99d46d8924c293721e25355dbec2a51bab2b46a29e843b83c71f1434b6", // a chart from a repository or a Secret, values from ConfigMaps and Secrets, Helm mode; status.chart
		9:  "bda8cb02d48add6674888ec5072e92816bf9c51246b5b0478080e4f72a195d82", // a Release's createNamespace; ClusterNotFound and CredentialsUnavailable among a member's reasons
		10: "6a8f86a1834179fa5187be535c4850e2305c841504df9dfc8b1e65dc6f156f46", // a rollout's onFailure (Stop, Rollback) and approval (Automatic, Manual)
		11: "f3d7a8723b5c1ee99e1c77aa6ff068d6b2b607e8e439e060b82f01d9cb6ee536", // a Release's status.lastCompleteRevision
		12: "a3137a31103778098c07cb6f5ba464ef20b3d663794bb11bb27f7bbe52ab4168", // a Release's spec.dependsOn
		13: "eacbeaadcad4ef5a7365f8d10e1a9bf842ba32e60e82b3308531137a14a692c3", // a Release's spec.health
		14: "12a40d7b8ccca471853ebb442c5acc1a004946114fa8bfb994d2881c40d3fcbd", // a Release's spec.feedback and its members' feedback
		15: "2ce88cc2801326c214b6d6ced600edcf470974789125afce482d39f87f056a9e", // a Release's spec.overrides
		16: "84891fe5f10c795805efc5b8970c81ea8280dcc11228e28ba617ca585af9b027", // an override's cel
		17: "12fc176675b014527383a15ff1790c71eac93d1c548c2626167bce85274c8316", // a Release's departureGraceSeconds, a member's departedAt; dependsOn's refusal names its field
		18: "12661c3deaeb407f5d59557aea1f71eafad21282822d4f6af4f584115cd6da21", // a Cluster's kubernetesApiEndpoints.tunnel
		19: "c3c9b9e687057b1b5e9d7df71b05e3cfb040d79b9c6b8324867232660314bd31", // a Cluster's status.resources
		20: "b71cfdea8570b7f6313ab6f3570410d79e0ef9e0bee68de98742e92df9d2208f", // a Placement's fit, prefer, maxResourceAgeSeconds, rebalance and status.lastRebalanceTime; a Cluster's status.properties
		21: "93936e963312b3767673913479e5e6e8ec44093cecde326f48d351880ff79f40", // a Release's divide (by weights or capacity), a member's shares and status.divisions; a Cluster's Nodes and CPU columns
		22: "ac613d0ab139250c3cb38c49b79014b72319dccb27bfde3e1ab66fc084dd754b", // a Placement's status.scores
	}
	if want := digests[clusterregistry.SchemaVersion]; digest != want {
		t.Errorf("the CRD's schema changed (digest %s) without a new schema version: raise SchemaVersion and the "+
			"clusterregistry.k8s.io/schema-version markers in clusterregistry/v1alpha1, run hack/update-codegen.sh, "+
			"and record the digest here", digest)
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
