package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition returns the condition of the given type, or nil when the status has none.
func (s *ClusterStatus) Condition(conditionType string) *metav1.Condition {
	return meta.FindStatusCondition(s.Conditions, conditionType)
}

// SetCondition adds or updates the condition of c.Type. LastTransitionTime changes only when the
// status does (it is set to now when c leaves it zero), so repeated probes with the same outcome do
// not churn the object. It reports whether anything changed.
func (s *ClusterStatus) SetCondition(c metav1.Condition) bool {
	return meta.SetStatusCondition(&s.Conditions, c)
}

// RemoveCondition removes the condition of the given type and reports whether it was there.
func (s *ClusterStatus) RemoveCondition(conditionType string) bool {
	return meta.RemoveStatusCondition(&s.Conditions, conditionType)
}

// IsReady reports whether the cluster's Ready condition is True.
func (c *Cluster) IsReady() bool {
	return meta.IsStatusConditionTrue(c.Status.Conditions, ConditionReady)
}

// IsNotReady reports whether the cluster's Ready condition is False. A cluster with no Ready
// condition, or an Unknown one, is neither ready nor not ready: nobody has probed it yet.
func (c *Cluster) IsNotReady() bool {
	return meta.IsStatusConditionFalse(c.Status.Conditions, ConditionReady)
}
