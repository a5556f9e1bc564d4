package optikon

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cluster-registry/sdk/chartrender"
)

// MaxChartUpload bounds chartTar: the chart is kept in a Secret of the set, which the registry
// caps at 1 MiB with its metadata. What it unpacks to is bounded by chartrender.Load.
const MaxChartUpload = 768 << 10

// maxFormField bounds the form's other fields: names.
const maxFormField = 256

// chartUpload is a POST or PUT /v0/releases form: the chart, and for POST the release's name and
// the namespace it goes to on each cluster.
type chartUpload struct {
	name, namespace string
	chart           []byte
	digest          string
	chartName       string
}

// readUpload reads the multipart form Optikon's UI sends, bounded, and checks it: chartTar a
// chart Helm loads within chartrender's bounds, name and namespace DNS labels (when named).
func readUpload(r *http.Request, needNames bool) (chartUpload, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, MaxChartUpload+64<<10)
	mr, err := r.MultipartReader()
	if err != nil {
		return chartUpload{}, apierrors.NewBadRequest("the body must be multipart/form-data with chartTar (a packaged chart), name and namespace: " + err.Error())
	}
	var up chartUpload
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return chartUpload{}, uploadError(err)
		}
		switch part.FormName() {
		case "chartTar":
			if up.chart, err = readPart(part, MaxChartUpload, "chartTar"); err != nil {
				return chartUpload{}, err
			}
		case "name", "namespace":
			v, err := readPart(part, maxFormField, part.FormName())
			if err != nil {
				return chartUpload{}, err
			}
			if part.FormName() == "name" {
				up.name = strings.TrimSpace(string(v))
			} else {
				up.namespace = strings.TrimSpace(string(v))
			}
		}
	}
	return up, up.check(needNames)
}

// readPart reads a form field of at most limit bytes.
func readPart(part io.Reader, limit int64, field string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(part, limit+1))
	if err != nil {
		return nil, uploadError(err)
	}
	if int64(len(data)) > limit {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s is larger than %d bytes", field, limit))
	}
	return data, nil
}

// uploadError is a form that could not be read, said as the client's fault: too large, or cut.
func uploadError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return apierrors.NewBadRequest(fmt.Sprintf("the form is larger than %d bytes: chartTar may be at most %d", tooLarge.Limit, MaxChartUpload))
	}
	return apierrors.NewBadRequest("the multipart form could not be read: " + err.Error())
}

// check says what is wrong with the form, naming the field.
func (up *chartUpload) check(needNames bool) error {
	if len(up.chart) == 0 {
		return apierrors.NewBadRequest("chartTar is required: a packaged chart, as helm package writes it")
	}
	for _, f := range []struct{ field, value string }{{"name", up.name}, {"namespace", up.namespace}} {
		if f.value == "" && !needNames {
			continue
		}
		if errs := validation.IsDNS1123Label(f.value); len(errs) > 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("%s %q: %s", f.field, f.value, strings.Join(errs, "; ")))
		}
	}
	if len(up.name) > 53 {
		return apierrors.NewBadRequest(fmt.Sprintf("name %q: Helm's release names are at most 53 characters", up.name))
	}
	c, err := chartrender.Load(up.chart)
	if err != nil {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest,
			Reason: metav1.StatusReasonBadRequest, Message: "chartTar is not a chart Helm can install: " + err.Error()}}
	}
	up.digest, up.chartName = c.Digest, c.Name()
	return nil
}
