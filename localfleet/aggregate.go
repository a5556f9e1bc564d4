package localfleet

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// AggregateClusterRoles gives each ClusterRole with an aggregationRule the rules of the
// ClusterRoles it selects, as kube-controller-manager's clusterrole-aggregation controller does.
// A local fleet runs no controller manager, so without this kubectl's view, edit and admin would
// grant nothing, unlike on any real cluster. Servers do it once when they start; call it again
// after adding roles that aggregate (clusterregistry install's do).
func (s *Server) AggregateClusterRoles(ctx context.Context) error {
	kube, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	list, err := kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("aggregating ClusterRoles: %w", err)
	}
	roles := list.Items
	changed := map[string]bool{}
	// Aggregated roles select aggregated roles (admin takes edit's rules, edit view's): repeat
	// until nothing changes.
	for pass, again := 0, true; again && pass < 10; pass++ {
		again = false
		for i := range roles {
			r := &roles[i]
			if r.AggregationRule == nil {
				continue
			}
			var rules []rbacv1.PolicyRule
			for _, sel := range r.AggregationRule.ClusterRoleSelectors {
				selector, err := metav1.LabelSelectorAsSelector(&sel)
				if err != nil {
					return fmt.Errorf("ClusterRole %s's aggregationRule: %w", r.Name, err)
				}
				for _, other := range roles {
					if other.Name == r.Name || !selector.Matches(labels.Set(other.Labels)) {
						continue
					}
					for _, rule := range other.Rules {
						if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return reflect.DeepEqual(have, rule) }) {
							rules = append(rules, rule)
						}
					}
				}
			}
			if !reflect.DeepEqual(rules, r.Rules) {
				r.Rules, changed[r.Name], again = rules, true, true
			}
		}
	}
	for i := range roles {
		if !changed[roles[i].Name] {
			continue
		}
		if _, err := kube.RbacV1().ClusterRoles().Update(ctx, &roles[i], metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("aggregating ClusterRole %s: %w", roles[i].Name, err)
		}
	}
	return nil
}
