package clusterregistry

import (
	"context"
	"fmt"
	"maps"
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

// Install creates the Cluster CRD, or upgrades an existing one to this SDK's schema, and waits
// until the API server reports it Established, so that Clusters can be written as soon as it
// returns. It is safe to call on every start: an up-to-date CRD is left as it is.
//
// Labels and annotations that others put on the CRD are kept. Bound the wait with ctx.
func Install(ctx context.Context, client apiextensionsclient.Interface) error {
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	want := CRD()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = crds.Create(ctx, want, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if !needsUpgrade(have, want) {
			return nil
		}
		upgraded := have.DeepCopy()
		upgraded.Spec = want.Spec
		upgraded.Labels = mergeStrings(upgraded.Labels, want.Labels)
		upgraded.Annotations = mergeStrings(upgraded.Annotations, want.Annotations)
		_, err = crds.Update(ctx, upgraded, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("installing CRD %s: %w", want.Name, err)
	}
	return waitEstablished(ctx, client, want.Name)
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
