package main

import (
	"fmt"
	"net/url"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// selection is what ?labelSelector= and ?fieldSelector= of GET /clusters and GET
// /watch/clusters choose, read as the registry reads them for Clusters: labels of the Cluster,
// and the fields a custom resource serves, metadata.name and metadata.namespace. A field the
// registry would not serve is refused, as it refuses it, never ignored.
type selection struct {
	labels labels.Selector
	fields fields.Selector
}

// selectableFields are the fields the registry serves field selectors on for Clusters.
var selectableFields = map[string]bool{"metadata.name": true, "metadata.namespace": true}

func parseSelection(q url.Values) (selection, error) {
	out := selection{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if raw := q.Get("labelSelector"); raw != "" {
		if out.labels, err = labels.Parse(raw); err != nil {
			return out, fmt.Errorf("labelSelector %q: %w", raw, err)
		}
	}
	if raw := q.Get("fieldSelector"); raw != "" {
		if out.fields, err = fields.ParseSelector(raw); err != nil {
			return out, fmt.Errorf("fieldSelector %q: %w", raw, err)
		}
		for _, r := range out.fields.Requirements() {
			if !selectableFields[r.Field] {
				return out, fmt.Errorf("fieldSelector %q: field label not supported: %s (Clusters select by metadata.name and metadata.namespace)", raw, r.Field)
			}
		}
	}
	return out, nil
}

// matches reports whether the member summarized by c is selected.
func (s selection) matches(c clusterSummary) bool {
	return s.labels.Matches(labels.Set(c.Labels)) &&
		s.fields.Matches(fields.Set{"metadata.name": c.Name, "metadata.namespace": c.Namespace})
}
