package placement

import (
	"time"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// seen is what fit, prefer and CEL read of one Cluster: its figures as the policy may judge
// them, and the variables an expression sees. Each is made once, and only when asked: most of a
// fleet is screened out by a selector match alone.
type seen struct {
	c   *Compiled
	cl  *v1alpha1.Cluster
	now time.Time

	judged bool
	res    *v1alpha1.ClusterResources // nil, with why and msg, when missing or too old
	why    Reason
	msg    string
	vars   map[string]any
}

// figures are the Cluster's status.resources, fresh enough for the policy, or nil and why.
func (s *seen) figures() (*v1alpha1.ClusterResources, Reason, string) {
	if !s.judged && s.c.readsResources() {
		s.res, s.why, s.msg = s.c.figures(s.cl, s.now)
	}
	s.judged = true
	return s.res, s.why, s.msg
}

// variables are what a CEL expression sees of the Cluster.
func (s *seen) variables() map[string]any {
	if s.vars == nil {
		res, _, _ := s.figures()
		s.vars = clusterVars(s.cl, res)
	}
	return s.vars
}
