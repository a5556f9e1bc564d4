package clusterregistry

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// establishPollInterval is short because a CRD is usually Established within a second of being
// written, and Install's callers are waiting on it.
const establishPollInterval = 100 * time.Millisecond

// SchemaVersion is the version of the registry's API (its CRDs' schemas) that this SDK installs.
// Each CRD carries it in the SchemaVersionAnnotation, and every change to a schema, or a new
// CRD, raises it, so that Install can tell a newer CRD from an older one. Version 5 added the
// Placement CRD, version 6 the Release and ReleaseStatusSlice CRDs, version 7 a Release's chart
// source, version 9 a Release's createNamespace, version 10 a rollout's onFailure and approval,
// version 17 a Release's departureGraceSeconds and a member's departedAt (phase Departed),
// version 18 a Cluster's tunnel, version 19 a Cluster's status.resources, version 20 a
// Placement's fit and prefer, version 21 a Release's divide and status.divisions, version 22
// a Placement's status.scores.
const SchemaVersion = 22

// SchemaVersionAnnotation, on each CRD, holds the SchemaVersion of the SDK that installed it.
const SchemaVersionAnnotation = "clusterregistry.k8s.io/schema-version"

// InstallAction says what Install did to a CRD.
type InstallAction string

const (
	// Created: there was no such CRD; Install created it.
	Created InstallAction = "Created"
	// Upgraded: the CRD was older than this SDK's (or the same version, changed by hand); Install
	// replaced its spec.
	Upgraded InstallAction = "Upgraded"
	// Unchanged: the CRD was already this SDK's.
	Unchanged InstallAction = "Unchanged"
	// KeptNewer: the CRD was installed by a newer SDK; Install left it as it was. A newer schema
	// serves this SDK's Clusters: the API version is the same and fields are only ever added.
	KeptNewer InstallAction = "KeptNewer"
)

// InstallResult reports what Install found and did to one CRD.
type InstallResult struct {
	// CRD is the CRD's name.
	CRD    string
	Action InstallAction
	// Found is the schema version of the CRD Install found: 0 when there was none, or when it
	// predates recorded versions.
	Found int
}

func (r InstallResult) String() string {
	switch r.Action {
	case Created:
		return fmt.Sprintf("CRD %s created with schema version %d", r.CRD, SchemaVersion)
	case Upgraded:
		return fmt.Sprintf("CRD %s upgraded from schema version %d to %d", r.CRD, r.Found, SchemaVersion)
	case KeptNewer:
		return fmt.Sprintf("CRD %s has schema version %d, newer than this SDK's %d; left as it is", r.CRD, r.Found, SchemaVersion)
	default:
		return fmt.Sprintf("CRD %s is up to date at schema version %d", r.CRD, SchemaVersion)
	}
}

// InstallResults are what Install did to each CRD of the API, in the order of CRDs.
type InstallResults []InstallResult

// String is one line per CRD.
func (rs InstallResults) String() string {
	lines := make([]string, len(rs))
	for i, r := range rs {
		lines[i] = r.String()
	}
	return strings.Join(lines, "\n")
}

// Of is the result for the CRD named name; the zero result when Install did not reach it.
func (rs InstallResults) Of(name string) InstallResult {
	for _, r := range rs {
		if r.CRD == name {
			return r
		}
	}
	return InstallResult{}
}

// Install creates the registry's CRDs (CRDs: Clusters, Placements), or upgrades older ones to
// this SDK's schema, and waits until the API server reports each Established, so that Clusters
// and Placements can be written as soon as it returns. It is safe to call on every start: an
// up-to-date CRD is left as it is. The results say what it did to each CRD, in order; on an
// error they hold the CRDs done before it.
//
// It never downgrades. A CRD whose schema version is newer than SchemaVersion, installed by a
// tool built on a newer SDK, is left alone and reported as KeptNewer: replacing it would roll
// its schema back (and the server would then prune the newer fields from every Cluster it
// serves), and two tools on different SDKs would flap it on every start.
//
// Labels and annotations that others put on the CRD are kept. Bound the wait with ctx.
func Install(ctx context.Context, client apiextensionsclient.Interface) (InstallResults, error) {
	var results InstallResults
	for _, crd := range CRDs() {
		result, err := installCRD(ctx, client, crd)
		if err != nil {
			return results, err
		}
		results = append(results, result)
	}
	return results, nil
}

// installCRD creates or upgrades one CRD, and waits for it to be Established.
func installCRD(ctx context.Context, client apiextensionsclient.Interface, want *apiextensionsv1.CustomResourceDefinition) (InstallResult, error) {
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	var result InstallResult
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			result = InstallResult{CRD: want.Name, Action: Created}
			_, err = crds.Create(ctx, want, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		result = InstallResult{CRD: want.Name, Action: Unchanged, Found: schemaVersion(have)}
		switch {
		case result.Found > SchemaVersion:
			result.Action = KeptNewer
			return nil
		case !needsUpgrade(have, want):
			return nil
		}
		result.Action = Upgraded
		upgraded := have.DeepCopy()
		upgraded.Spec = want.Spec
		upgraded.Labels = mergeStrings(upgraded.Labels, want.Labels)
		upgraded.Annotations = mergeStrings(upgraded.Annotations, want.Annotations)
		_, err = crds.Update(ctx, upgraded, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return InstallResult{}, fmt.Errorf("installing CRD %s: %w", want.Name, err)
	}
	return result, waitEstablished(ctx, client, want.Name)
}

// schemaVersion reads a CRD's SchemaVersionAnnotation; a CRD without one (or with one that is not
// a number) is taken as version 0, older than any SDK that records versions.
func schemaVersion(crd *apiextensionsv1.CustomResourceDefinition) int {
	v, err := strconv.Atoi(crd.Annotations[SchemaVersionAnnotation])
	if err != nil || v < 0 {
		return 0
	}
	return v
}

func needsUpgrade(have, want *apiextensionsv1.CustomResourceDefinition) bool {
	// The server defaults fields we leave empty (conversion strategy, for one), so compare what we
	// set after defaulting ours the same way.
	defaulted := want.Spec.DeepCopy()
	if defaulted.Conversion == nil {
		defaulted.Conversion = have.Spec.Conversion
	}
	if !equality.Semantic.DeepEqual(have.Spec, *defaulted) {
		return true
	}
	for k, v := range want.Annotations {
		if have.Annotations[k] != v {
			return true
		}
	}
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return true
		}
	}
	return false
}

func mergeStrings(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

func waitEstablished(ctx context.Context, client apiextensionsclient.Interface, name string) error {
	var last *apiextensionsv1.CustomResourceDefinition
	err := wait.PollUntilContextCancel(ctx, establishPollInterval, true, func(ctx context.Context) (bool, error) {
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = crd
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
				return false, fmt.Errorf("CRD %s: names not accepted: %s", name, c.Message)
			}
		}
		return isEstablished(crd), nil
	})
	if err != nil {
		if last != nil && ctx.Err() != nil {
			return fmt.Errorf("waiting for CRD %s to be Established (conditions: %v): %w", name, last.Status.Conditions, err)
		}
		return fmt.Errorf("waiting for CRD %s to be Established: %w", name, err)
	}
	return nil
}

func isEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
