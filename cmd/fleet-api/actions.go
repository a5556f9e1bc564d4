package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clientset/versioned"

	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
	"github.com/cluster-registry/sdk/rollout"
)

// actionRequest is the body of POST /releases/{namespace}/{name}/{action}: the wave to approve
// up to (approve; 0 is the next), the revision to put back (undo; 0 is the previous).
type actionRequest struct {
	Wave       int   `json:"wave,omitempty"`
	ToRevision int64 `json:"toRevision,omitempty"`
}

// actionResult is what an action did, in the words `clusterregistry rollout` prints.
type actionResult struct {
	Message string `json:"message"`
}

// act is POST /releases/{namespace}/{name}/{action}: a rollout verb (approve, pause, resume,
// restart, undo) done as the caller, with package rollout, as `clusterregistry rollout` does it.
// The registry decides whether the caller may (impersonation): the page's buttons only show
// what it would allow.
func (s *server) act(r *http.Request) (response, error) {
	ns, name, action := r.PathValue("namespace"), r.PathValue("name"), r.PathValue("action")
	var req actionRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		return response{}, apierrors.NewBadRequest(fmt.Sprintf("the body of %s is not {wave} or {toRevision}: %v", action, err))
	}
	cfg, err := s.guard.callerConfig(r.Context())
	if err != nil {
		return response{}, err
	}
	message, err := s.do(r, cfg, ns, name, action, req)
	var invalid *rollout.InvalidError
	var refused *rollout.RefusedError
	switch {
	case errors.As(err, &invalid):
		return response{}, apierrors.NewBadRequest(fmt.Sprintf("%s %s: %s", action, rollout.Ref(name), invalid.Message))
	case errors.As(err, &refused):
		return response{}, httpapi.StatusError(http.StatusConflict, metav1.StatusReasonConflict, refused.Message)
	case err != nil:
		return response{}, err
	}
	return ok(actionResult{Message: message}), nil
}

// do carries out action with the caller's config cfg, and says what it did.
func (s *server) do(r *http.Request, cfg *rest.Config, ns, name, action string, req actionRequest) (string, error) {
	ctx, ref := r.Context(), rollout.Ref(name)
	registry, err := versioned.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	releases := registry.ClusterregistryV1alpha1()
	switch action {
	case "approve":
		a, err := rollout.Approve(ctx, releases, ns, name, req.Wave)
		return fmt.Sprintf("%s wave %d of revision %s approved", ref, a.Wave, a.Revision), err
	case "pause":
		return ref + " paused", rollout.Pause(ctx, releases, ns, name)
	case "resume":
		return ref + " resumed", rollout.Resume(ctx, releases, ns, name)
	case "restart":
		return ref + " restarted", rollout.Restart(ctx, releases, ns, name, time.Now())
	case "undo":
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return "", err
		}
		u, err := rollout.Undo(ctx, releases, kube, ns, name, req.ToRevision)
		if u.Skipped {
			return fmt.Sprintf("%s skipped rollback (its spec already is revision %d's)", ref, u.To.Number), err
		}
		return fmt.Sprintf("%s rolled back to revision %d (%s)", ref, u.To.Number, u.To.Hash), err
	}
	return "", httpapi.StatusError(http.StatusNotFound, metav1.StatusReasonNotFound,
		fmt.Sprintf("%q is not a rollout action: POST /releases/NAMESPACE/NAME/ACTION takes approve, pause, resume, restart or undo", action))
}
