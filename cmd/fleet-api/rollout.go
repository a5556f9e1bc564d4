package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/delivery"
)

// rolloutView is GET /releases/{namespace}/{name}/rollout: where a Release's rollout stands, as
// a picture can show it. Its waves are the releases controller's (delivery.Waves of the
// Placement's decision), each member with its phase; its revisions are the Release's history, by
// number; actions are what the caller may do to it.
type rolloutView struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Revision is the current revision's hash, Number its number in the history (0 when the
	// history is not readable or not written yet).
	Revision string `json:"revision,omitempty"`
	Number   int64  `json:"number,omitempty"`
	// LastComplete is the number of status.lastCompleteRevision: the newest that reached every
	// member.
	LastComplete int64  `json:"lastComplete,omitempty"`
	Approval     string `json:"approval"`
	// Approved is how many waves of the current revision are approved (Manual approval).
	Approved int  `json:"approved"`
	Paused   bool `json:"paused"`
	// Wave is the wave the rollout stands at (from 1), of Waves.
	Wave                    int32  `json:"wave"`
	SoakSeconds             int32  `json:"soakSeconds,omitempty"`
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
	// WaveList is each wave, in order; WavesUnknown says why it is empty when the decision
	// cannot be read.
	WaveList     []waveView `json:"waves"`
	WavesUnknown string     `json:"wavesUnknown,omitempty"`
	// Revisions are the history, oldest first; RevisionsUnknown says why it is empty when the
	// caller may not read it (ControllerRevisions of the set): a settled answer, not a wait.
	Revisions        []revisionView `json:"revisions"`
	RevisionsUnknown string         `json:"revisionsUnknown,omitempty"`
	Actions          actions        `json:"actions"`
}

// waveView is one wave: its members and their phases, and, for the current revision's waves
// that began, when; DeadlineAt is when the current wave's progress deadline passes.
type waveView struct {
	Wave       int           `json:"wave"`
	Members    []chartMember `json:"members"`
	Current    bool          `json:"current,omitempty"`
	Approved   bool          `json:"approved,omitempty"`
	Started    *metav1.Time  `json:"started,omitempty"`
	Finished   *metav1.Time  `json:"finished,omitempty"`
	DeadlineAt *metav1.Time  `json:"deadlineAt,omitempty"`
}

// revisionView is one revision of the history.
type revisionView struct {
	Number      int64                `json:"number"`
	Hash        string               `json:"hash"`
	ChangeCause string               `json:"changeCause,omitempty"`
	Created     metav1.Time          `json:"created"`
	Summary     string               `json:"summary"`
	Waves       []delivery.WaveTimes `json:"waves,omitempty"`
	Current     bool                 `json:"current,omitempty"`
}

// actions are what the caller may do to the Release, by the registry's RBAC: every rollout verb
// updates it (undo reads its history too). The page shows a button for each allowed.
type actions struct {
	Approve bool `json:"approve"`
	Pause   bool `json:"pause"`
	Resume  bool `json:"resume"`
	Restart bool `json:"restart"`
	Undo    bool `json:"undo"`
}

// getRollout answers where Release {namespace}/{name}'s rollout stands, as the caller: the
// Release, its status slices and its history are read as the caller; the decision, which names
// the same members its status slices do, with the server's identity (callers who may read a
// Release seldom may read PlacementDecisions).
func (s *server) getRollout(r *http.Request) (response, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	registry, err := s.guard.asCaller(r.Context())
	if err != nil {
		return response{}, err
	}
	rel, err := registry.ClusterregistryV1alpha1().Releases(ns).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil {
		return response{}, err
	}
	var members []chartMember
	if sl, err := registry.ClusterregistryV1alpha1().ReleaseStatusSlices(ns).List(r.Context(), metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=" + name}); err == nil {
		members = releaseOf(rel, sl.Items).PerMember
	}
	view := rolloutOf(rel)
	s.addWaves(r.Context(), &view, rel, members)
	if err := s.addHistory(r.Context(), &view, rel); err != nil {
		return response{}, err
	}
	if view.Actions, err = s.actionsFor(r.Context(), rel); err != nil {
		return response{}, apierrors.NewInternalError(fmt.Errorf("asking the registry what you may do to release %s/%s: %w", ns, name, err))
	}
	return ok(view), nil
}

// rolloutOf is what rel's spec and status say of its rollout.
func rolloutOf(rel *v1alpha1.Release) rolloutView {
	v := rolloutView{Namespace: rel.Namespace, Name: rel.Name, Revision: rel.Status.Revision, Paused: rel.Spec.Suspend,
		Wave: rel.Status.Wave, Approval: string(v1alpha1.ApprovalAutomatic), WaveList: []waveView{}, Revisions: []revisionView{}}
	if ro := rel.Spec.Rollout; ro != nil {
		v.Approval = string(cmp.Or(ro.Approval, v1alpha1.ApprovalAutomatic))
		v.SoakSeconds, v.ProgressDeadlineSeconds = ro.SoakSeconds, ro.ProgressDeadlineSeconds
	}
	if rel.Status.Revision != "" {
		v.Approved = delivery.Approved(rel, rel.Status.Revision)
	}
	return v
}

// addWaves fills in the waves the releases controller rolls rel out in, each member with its
// phase from members.
func (s *server) addWaves(ctx context.Context, v *rolloutView, rel *v1alpha1.Release, members []chartMember) {
	dec, err := decision.Read(ctx, s.guard.decisions, rel.Namespace, rel.DecisionKey())
	if err != nil {
		v.WavesUnknown = fmt.Sprintf("the decision of placement %s cannot be read: %v", rel.DecisionKey(), err)
		return
	}
	byName := map[string]chartMember{}
	for _, m := range members {
		byName[m.Cluster] = m
	}
	for i, wave := range delivery.Waves(dec.Clusters, dec.Groups, rel.Spec.Rollout) {
		wv := waveView{Wave: i + 1, Members: []chartMember{}, Current: int32(i+1) == rel.Status.Wave,
			Approved: v.Approval != string(v1alpha1.ApprovalManual) || i+1 <= v.Approved}
		for _, c := range wave {
			m, ok := byName[c.Name]
			if !ok {
				m = chartMember{Cluster: c.Name, Phase: string(v1alpha1.PhasePending)}
			}
			wv.Members = append(wv.Members, m)
		}
		v.WaveList = append(v.WaveList, wv)
	}
}

// addHistory fills in rel's revisions as the caller reads them, and the current wave's times; a
// caller who may not read them is told so in the view, and any other failure is the answer's.
func (s *server) addHistory(ctx context.Context, v *rolloutView, rel *v1alpha1.Release) error {
	cfg, err := s.guard.callerConfig(ctx)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	history, err := delivery.History(ctx, kube, rel)
	if apierrors.IsForbidden(err) {
		v.RevisionsUnknown = "not permitted: " + err.Error()
		return nil
	}
	if err != nil {
		return err
	}
	for _, h := range history {
		rv := revisionView{Number: h.Number, Hash: h.Hash, ChangeCause: h.ChangeCause, Created: metav1.NewTime(h.Created),
			Summary: revisionSummary(h.Record), Waves: h.Waves, Current: h.Hash == rel.Status.Revision}
		if rv.Current {
			v.Number = h.Number
			v.addWaveTimes(h.Waves)
		}
		if h.Hash == rel.Status.LastCompleteRevision {
			v.LastComplete = h.Number
		}
		v.Revisions = append(v.Revisions, rv)
	}
	return nil
}

// addWaveTimes puts the current revision's wave times on its waves, and the deadline on the
// wave that began and has not finished.
func (v *rolloutView) addWaveTimes(times []delivery.WaveTimes) {
	for _, t := range times {
		i := t.Wave - 1
		if i < 0 || i >= len(v.WaveList) {
			continue
		}
		wv := &v.WaveList[i]
		started := t.Started
		wv.Started, wv.Finished = &started, t.Finished
		if t.Finished == nil && v.ProgressDeadlineSeconds != nil {
			deadline := metav1.NewTime(t.Started.Add(time.Duration(*v.ProgressDeadlineSeconds) * time.Second))
			wv.DeadlineAt = &deadline
		}
	}
}

// revisionSummary says in a few words what a revision delivered: its chart and version, or its
// manifests.
func revisionSummary(rec delivery.RevisionRecord) string {
	switch src := rec.Source; {
	case rec.Chart != nil:
		return "chart " + rec.Chart.Name + " " + rec.Chart.Version
	case src.Chart != nil && src.Chart.ConfigMap != nil:
		return "chart from ConfigMap " + src.Chart.ConfigMap.Name
	case src.Chart != nil && src.Chart.Secret != nil:
		return "chart from Secret " + src.Chart.Secret.Name
	case src.ConfigMap != nil:
		return "manifests from ConfigMap " + src.ConfigMap.Name
	case len(src.Manifests) == 1:
		return "1 manifest"
	}
	return fmt.Sprintf("%d manifests", len(rec.Source.Manifests))
}

// actionsFor asks the registry what the caller may do to rel: every rollout verb updates it.
func (s *server) actionsFor(ctx context.Context, rel *v1alpha1.Release) (actions, error) {
	update, _, err := s.guard.allowedOn(ctx, "releases", "update", rel.Namespace, rel.Name)
	if err != nil || !update {
		return actions{}, err
	}
	manual := rel.Spec.Rollout != nil && rel.Spec.Rollout.Approval == v1alpha1.ApprovalManual
	return actions{Approve: manual, Pause: !rel.Spec.Suspend, Resume: rel.Spec.Suspend, Restart: true, Undo: true}, nil
}
