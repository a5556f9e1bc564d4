package health

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

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
	_, err := w.opts.Registry.ClusterregistryV1alpha1().Clusters(c.Namespace).ApplyStatus(ctx, ac,
		metav1.ApplyOptions{FieldManager: w.opts.FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("cluster %s/%s: applying status: %w", c.Namespace, c.Name, err)
	}
	return nil
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
