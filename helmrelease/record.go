package helmrelease

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Helm keeps each revision of a release on the member it is installed on, as a Secret of the
// release's namespace labelled owner=helm (its default storage driver): the release record,
// gzipped and base64'd, under "release". A reader that follows those Secrets (a cache of every
// member's, as fleet-api keeps) can say what `helm ls` there would without asking Helm.

// StorageSelector is the label selector of Helm's storage Secrets.
const StorageSelector = "owner=helm"

// MaxRecordSize bounds a release record once unzipped: a member's Secret is not trusted to be
// small (Helm's own are at most 1 MiB zipped, and a record unzips to many times that at most).
const MaxRecordSize = 16 << 20

// Revision is what a storage record says of one revision of a Helm release: never its values or
// its chart's files, which the record holds too.
type Revision struct {
	Name, Namespace             string
	Version                     int
	Status                      string // Helm's words: deployed, superseded, pending-upgrade, ...
	ChartName, ChartVersion     string
	FirstDeployed, LastDeployed time.Time
}

// record is the part of Helm's release record that Revision takes.
type record struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Version   int    `json:"version"`
	Info      struct {
		Status        string    `json:"status"`
		FirstDeployed time.Time `json:"first_deployed"`
		LastDeployed  time.Time `json:"last_deployed"`
	} `json:"info"`
	Chart struct {
		Metadata struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"metadata"`
	} `json:"chart"`
}

// StoredRevision decodes the release record of one of Helm's storage Secrets, as Helm's storage
// writes it: base64 of (usually) gzipped JSON, read to MaxRecordSize at most.
func StoredRevision(secret *corev1.Secret) (Revision, error) {
	raw, err := base64.StdEncoding.DecodeString(string(secret.Data["release"]))
	if err != nil {
		return Revision{}, fmt.Errorf("secret %s/%s: not Helm's release record: %w", secret.Namespace, secret.Name, err)
	}
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return Revision{}, fmt.Errorf("secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
		if raw, err = io.ReadAll(io.LimitReader(gz, MaxRecordSize+1)); err != nil {
			return Revision{}, fmt.Errorf("secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
		if len(raw) > MaxRecordSize {
			return Revision{}, errors.New("secret " + secret.Namespace + "/" + secret.Name + ": the release record unzips to more than 16 MiB")
		}
	}
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return Revision{}, fmt.Errorf("secret %s/%s: not Helm's release record: %w", secret.Namespace, secret.Name, err)
	}
	return Revision{Name: rec.Name, Namespace: rec.Namespace, Version: rec.Version, Status: rec.Info.Status,
		ChartName: rec.Chart.Metadata.Name, ChartVersion: rec.Chart.Metadata.Version,
		FirstDeployed: rec.Info.FirstDeployed, LastDeployed: rec.Info.LastDeployed}, nil
}
