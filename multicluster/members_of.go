package multicluster

import (
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// MembersOf returns Members of the given Clusters that match opts, ordered by namespace and
// name: a fixed set, such as Clusters read from a file or built by hand, where a Fleet would
// follow the registry. Clusters with the same namespace and name replace earlier ones. The
// Members keep pointers to the given Clusters, as a Fleet's keep its informer's objects: do not
// change them afterwards (a Member reads its Cluster's spec again only when its resolution is due
// for revalidation); make new Members of changed Clusters instead.
func MembersOf(resolver *access.Resolver, clusters []v1alpha1.Cluster, opts FleetOptions) []*Member {
	if opts.Scheme == nil {
		opts.Scheme = defaultScheme
	}
	index := map[string]int{}
	var out []*Member
	for i := range clusters {
		c := &clusters[i]
		if !opts.matches(c) {
			continue
		}
		m := newMember(c, resolver, opts.Scheme)
		key := m.key.String()
		if j, ok := index[key]; ok {
			out[j] = m
			continue
		}
		index[key] = len(out)
		out = append(out, m)
	}
	sortMembers(out)
	return out
}

// LoadMembers reads a ClusterList (or a List of Clusters, as `kubectl get clusters -o yaml`
// writes) from a YAML or JSON file and returns MembersOf the Clusters that match opts. Every
// Cluster must pass ValidateCluster; the error names the file and each Cluster that does not,
// and then no Member is returned.
func LoadMembers(path string, resolver *access.Resolver, opts FleetOptions) ([]*Member, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list v1alpha1.ClusterList
	if err := yaml.UnmarshalStrict(data, &list); err != nil {
		return nil, fmt.Errorf("%s: not a ClusterList: %w", path, err)
	}
	var errs []error
	for i := range list.Items {
		c := &list.Items[i]
		if c.Kind != "" && c.Kind != "Cluster" {
			errs = append(errs, fmt.Errorf("%s: items[%d] is a %s, not a Cluster", path, i, c.Kind))
			continue
		}
		if fieldErrs := v1alpha1.ValidateCluster(c); len(fieldErrs) > 0 {
			errs = append(errs, fmt.Errorf("%s: cluster %s/%s: %w", path, c.Namespace, c.Name, fieldErrs.ToAggregate()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return MembersOf(resolver, list.Items, opts), nil
}
