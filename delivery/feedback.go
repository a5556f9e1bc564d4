package delivery

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/jsonpath"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/safetext"
)

// A Release's spec.feedback reads values from the members' copies of its objects into each
// member's status entry: where the Controller judges an object's health (the apply's answer, the
// watch's events, a recheck from the watch cache), it reads them too, so a value is as current as
// the watch, and status is written only when one changed.

// feedbackValueMax is how long a value may be in status; feedbackReadMax how much a path may
// produce before it is cut (a path over a huge list).
const (
	feedbackValueMax = 256
	feedbackReadMax  = 4096
)

// feedbackReader reads one spec.feedback value.
type feedbackReader struct {
	name   string
	gk     schema.GroupKind
	object string
	path   *jsonpath.JSONPath
}

// compileFeedback parses rel's spec.feedback; an error names the entry and says why.
func compileFeedback(rel *v1alpha1.Release) ([]feedbackReader, error) {
	var out []feedbackReader
	for i, f := range rel.Spec.Feedback {
		// A Secret's values never reach status, which the set's viewers read: a member's
		// controllers fill some in (a service account's token).
		if f.Group == "" && f.Kind == "Secret" {
			return nil, fmt.Errorf("spec.feedback[%d] (%s): reads a Secret; a Secret's values are not copied into status, where the cluster set's viewers read them", i, f.Name)
		}
		p := jsonpath.New(f.Name).AllowMissingKeys(true)
		if err := p.Parse(f.JSONPath); err != nil {
			return nil, fmt.Errorf("spec.feedback[%d] (%s): jsonPath %q: %w", i, f.Name, f.JSONPath, err)
		}
		out = append(out, feedbackReader{name: f.Name, gk: schema.GroupKind{Group: f.Group, Kind: f.Kind}, object: f.ObjectName, path: p})
	}
	return out, nil
}

// readFeedback is what readers read from u, by name; nil when none reads it.
func readFeedback(readers []feedbackReader, u *unstructured.Unstructured) map[string]string {
	var out map[string]string
	for _, r := range readers {
		if r.object != u.GetName() || r.gk != u.GroupVersionKind().GroupKind() {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[r.name] = r.read(u)
	}
	return out
}

// errFull ends a path's output past feedbackReadMax.
var errFull = errors.New("full")

type cappedBuffer struct{ bytes.Buffer }

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > feedbackReadMax {
		b.Buffer.Write(p[:max(feedbackReadMax-b.Len(), 0)])
		return 0, errFull
	}
	return b.Buffer.Write(p)
}

func (r feedbackReader) read(u *unstructured.Unstructured) string {
	var buf cappedBuffer
	if err := r.path.Execute(&buf, u.Object); err != nil && !errors.Is(err, errFull) {
		return ""
	}
	return safetext.OneLine(buf.String(), feedbackValueMax)
}

// feedbackOf is a member's values from its objects, by name.
func feedbackOf(objects []*applied) []v1alpha1.ReleaseFeedbackValue {
	var out []v1alpha1.ReleaseFeedbackValue
	for _, a := range objects {
		for name, value := range a.feedback {
			out = append(out, v1alpha1.ReleaseFeedbackValue{Name: name, Value: value})
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.ReleaseFeedbackValue) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b v1alpha1.ReleaseFeedbackValue) bool { return a.Name == b.Name })
}
