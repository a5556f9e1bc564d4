package health

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	crv1alpha1ac "github.com/cluster-registry/sdk/applyconfiguration/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// notProbed is the condition of a member not probed for too long.
var notProbed = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonNotProbed}

// writer writes Clusters' status with server-side apply, and Events on transitions.
type writer struct {
	opts        *Options
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

func newWriter(ctx context.Context, opts *Options) (*writer, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: opts.Kube.CoreV1().Events("")})
	return &writer{opts: opts, broadcaster: b, recorder: b.NewRecorder(scheme, corev1.EventSource{Component: opts.FieldManager})}, nil
}

// apply writes the verdict as the Cluster's status: the Ready condition, version, clusterID,
// credentialsExpireAt and lastProbeTime, owned by the controller's field manager and nothing else.
func (w *writer) apply(ctx context.Context, c *v1alpha1.Cluster, v verdict, probed time.Time) error {
	cond := metav1ac.Condition().
		WithType(v.condition.Type).
		WithStatus(v.condition.Status).
		WithReason(v.condition.Reason).
		WithMessage(v.condition.Message).
		WithLastTransitionTime(v.condition.LastTransitionTime).
		WithObservedGeneration(c.Generation)
	if v.condition.LastTransitionTime.IsZero() {
		cond.WithLastTransitionTime(metav1.NewTime(probed))
	}
	status := crv1alpha1ac.ClusterStatus().WithConditions(cond).WithLastProbeTime(metav1.NewTime(probed.Truncate(time.Second)))
	if v.version != "" {
		status.WithVersion(v.version)
	}
	if v.clusterID != "" {
		status.WithClusterID(v.clusterID)
	}
	if !v.expires.IsZero() {
		status.WithCredentialsExpireAt(metav1.NewTime(v.expires))
	}
	ac := crv1alpha1ac.Cluster(c.Name, c.Namespace).WithStatus(status)
	if err := w.applyStatus(ctx, ac); err != nil {
		return fmt.Errorf("cluster %s/%s: applying status: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// applyStatus applies ac to a Cluster's status subresource, forcing the controller's ownership.
// The typed client's ApplyStatus decodes the whole Cluster the server answers with, which the
// controller never reads: that decoding was about half of the CPU of a status write (measured
// with BenchmarkHealth's profile). Through the REST client, the answer is read and checked for an
// error, not decoded. A registry client with no REST client (a fake clientset) is used as it is.
func (w *writer) applyStatus(ctx context.Context, ac *crv1alpha1ac.ClusterApplyConfiguration) error {
	typed := w.opts.Registry.ClusterregistryV1alpha1()
	rc := typed.RESTClient()
	if r, ok := rc.(*rest.RESTClient); rc == nil || ok && r == nil {
		_, err := typed.Clusters(*ac.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: w.opts.FieldManager, Force: true})
		return err
	}
	body, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	return rc.Patch(types.ApplyPatchType).Namespace(*ac.Namespace).Resource("clusters").Name(*ac.Name).SubResource("status").
		VersionedParams(&metav1.PatchOptions{FieldManager: w.opts.FieldManager, Force: ptr.To(true)}, metav1.ParameterCodec).
		Body(body).Do(ctx).Error()
}

// event records a transition of Ready on the Cluster, for kubectl describe.
func (w *writer) event(c *v1alpha1.Cluster, previous *metav1.Condition, now metav1.Condition) {
	kind := corev1.EventTypeNormal
	if now.Status != metav1.ConditionTrue || now.Reason == v1alpha1.ReasonCredentialsExpiring {
		kind = corev1.EventTypeWarning
	}
	from := "no Ready condition"
	if previous != nil {
		from = fmt.Sprintf("Ready %s (%s)", previous.Status, previous.Reason)
	}
	w.recorder.Eventf(c, kind, now.Reason, "%s, was %s: %s", "Ready "+string(now.Status), from, now.Message)
}

func (w *writer) shutdown() { w.broadcaster.Shutdown() }
