package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A Release's history, as Kubernetes keeps a Deployment's or a StatefulSet's: each revision it
// rolled out is a ControllerRevision in its cluster set, owned by it, that records what the
// revision was made from and when each of its waves started and finished. `clusterregistry
// rollout history` lists them and `rollout undo` puts one back (Undo).

// HistoryLimit is how many revisions of a Release are kept: the oldest go first, never the
// current one.
const HistoryLimit = 10

// ChangeCauseAnnotation, on a Release when a revision is first rolled out, is copied to the
// revision's record: kubectl's own annotation, which `rollout history` shows.
const ChangeCauseAnnotation = "kubernetes.io/change-cause"

// WavesAnnotation, on a revision's ControllerRevision, holds when each wave of its rollout
// started and finished (JSON, a list of WaveTimes).
const WavesAnnotation = "clusterregistry.k8s.io/waves"

// RevisionRecord is what a revision was made from: the Release's spec fields that shape its
// objects, and the chart a repository's version range resolved to.
type RevisionRecord struct {
	Source          v1alpha1.ReleaseSource       `json:"source"`
	TargetNamespace string                       `json:"targetNamespace,omitempty"`
	CreateNamespace bool                         `json:"createNamespace,omitempty"`
	Drift           *v1alpha1.ReleaseDrift       `json:"drift,omitempty"`
	Chart           *v1alpha1.ReleaseChartStatus `json:"chart,omitempty"`
	Overrides       []v1alpha1.ReleaseOverride   `json:"overrides,omitempty"`
}

// WaveTimes are when one wave of a revision's rollout started and, once every member of it was
// Ready for the soak (or failed), finished.
type WaveTimes struct {
	Wave     int          `json:"wave"`
	Started  metav1.Time  `json:"started"`
	Finished *metav1.Time `json:"finished,omitempty"`
}

// Revision is one revision of a Release's history.
type Revision struct {
	// Number counts the Release's revisions from 1, as a Deployment's do: a revision rolled
	// out again (an undo) takes the next number.
	Number int64
	// Hash is the revision as the Release's status and its objects' labels name it.
	Hash string
	// Name is its ControllerRevision's.
	Name        string
	Created     time.Time
	ChangeCause string
	Record      RevisionRecord
	Waves       []WaveTimes
}

// History is the recorded revisions of a Release, oldest first.
func History(ctx context.Context, kube kubernetes.Interface, rel *v1alpha1.Release) ([]Revision, error) {
	list, err := kube.AppsV1().ControllerRevisions(rel.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{v1alpha1.ReleaseLabel: rel.Name}.String()})
	if err != nil {
		return nil, fmt.Errorf("the history of release %s/%s: %w", rel.Namespace, rel.Name, err)
	}
	var out []Revision
	for i := range list.Items {
		if cr := &list.Items[i]; metav1.IsControlledBy(cr, rel) {
			out = append(out, revisionOf(cr))
		}
	}
	slices.SortFunc(out, func(a, b Revision) int { return cmp.Compare(a.Number, b.Number) })
	return out, nil
}

// revisionOf reads a ControllerRevision; what does not decode is left empty.
func revisionOf(cr *appsv1.ControllerRevision) Revision {
	r := Revision{Number: cr.Revision, Hash: cr.Labels[v1alpha1.RevisionLabel], Name: cr.Name,
		Created: cr.CreationTimestamp.Time, ChangeCause: cr.Annotations[ChangeCauseAnnotation]}
	_ = json.Unmarshal(cr.Data.Raw, &r.Record)
	_ = json.Unmarshal([]byte(cr.Annotations[WavesAnnotation]), &r.Waves)
	return r
}

// Undo is rel with revision to's spec put back, as kubectl rollout undo puts a Deployment's
// template back: the source, target namespace, createNamespace and drift policy it recorded. A
// chart whose repository's version range resolved to a version is pinned to that version (and
// its digest): undo means the chart that ran then. A source that names a ConfigMap or a Secret
// names it again, as it is now.
func Undo(rel *v1alpha1.Release, to Revision) *v1alpha1.Release {
	out := rel.DeepCopy()
	rec := to.Record.DeepCopy()
	out.Spec.Source, out.Spec.TargetNamespace, out.Spec.CreateNamespace, out.Spec.Drift, out.Spec.Overrides =
		rec.Source, rec.TargetNamespace, rec.CreateNamespace, rec.Drift, rec.Overrides
	if ch := out.Spec.Source.Chart; ch != nil && ch.Repository != nil && rec.Chart != nil {
		ch.Repository.Version, ch.Repository.Digest = rec.Chart.Version, rec.Chart.Digest
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[ChangeCauseAnnotation] = fmt.Sprintf("rollout undo to revision %d (%s)", to.Number, to.Hash)
	return out
}

// DeepCopy copies a record.
func (r *RevisionRecord) DeepCopy() *RevisionRecord {
	out := *r
	out.Source = *r.Source.DeepCopy()
	if r.Drift != nil {
		out.Drift = r.Drift.DeepCopy()
	}
	if r.Chart != nil {
		c := *r.Chart
		out.Chart = &c
	}
	out.Overrides = nil
	for _, o := range r.Overrides {
		out.Overrides = append(out.Overrides, *o.DeepCopy())
	}
	return &out
}

// recordOf is what rel's revision b is made from.
func recordOf(rel *v1alpha1.Release, b *Bundle) RevisionRecord {
	return RevisionRecord{Source: rel.Spec.Source, TargetNamespace: rel.Spec.TargetNamespace,
		CreateNamespace: rel.Spec.CreateNamespace, Drift: rel.Spec.Drift, Chart: b.chartStatus(), Overrides: rel.Spec.Overrides}
}

// revisionName is the ControllerRevision of a Release's revision.
func revisionName(rel *v1alpha1.Release, hash string) string {
	name := rel.Name
	if len(name) > 253-17 {
		name = name[:253-17]
	}
	return name + "-" + hash
}

// waveTimes are a revision's wave times brought up to a plan: a wave that began is started, a
// wave before the open one (all, when done) finished. Times once written stay.
func waveTimes(have []WaveTimes, p plan, now time.Time) []WaveTimes {
	out := slices.Clone(have)
	at := metav1.NewTime(now.Truncate(time.Second))
	for w := 1; w <= p.wave; w++ {
		i := slices.IndexFunc(out, func(t WaveTimes) bool { return t.Wave == w })
		if i < 0 {
			out = append(out, WaveTimes{Wave: w, Started: at})
			i = len(out) - 1
		}
		if w <= p.finished && out[i].Finished == nil {
			out[i].Finished = &at
		}
	}
	return out
}

// encodeRecord is a record as a ControllerRevision holds it.
func encodeRecord(rec RevisionRecord) runtime.RawExtension {
	raw, _ := json.Marshal(rec)
	return runtime.RawExtension{Raw: raw}
}
