package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Helm keeps each revision of a release on the member it is installed on, as a Secret of the
// release's namespace labelled owner=helm (its default storage driver): the release record,
// gzipped and base64'd, under "release". fleet-api caches those Secrets on every member and
// answers GET /v0/releases from them, as `helm ls` there would, with no request per poll.

// helmStorageSelector chooses Helm's storage Secrets.
const helmStorageSelector = "owner=helm"

// helmSummaryPrefix prefixes the annotations in which a cached storage Secret keeps the summary
// the transform made of it: read per answer as strings, with no decoding; the record itself
// (with the whole chart inside) is dropped on arrival.
const helmSummaryPrefix = "fleet-api.summary/"

// maxHelmRecord bounds a release record once unzipped: a member's answer is not trusted to be
// small, and Helm's own Secrets are at most 1 MiB zipped.
const maxHelmRecord = 16 << 20

// helmRevision is what GET /v0/releases shows of one revision of a Helm release on a member;
// times are RFC 3339, as Helm writes them. The values the member holds are not kept: they may
// come from Secrets (valuesFrom) that a caller who may list Releases may not read.
type helmRevision struct {
	Name, Namespace             string
	Version                     int
	Status                      string
	ChartName, ChartVersion     string
	FirstDeployed, LastDeployed string
}

// helmRecord is the part of Helm's release record that helmRevision takes.
type helmRecord struct {
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

// summarizeHelmSecret replaces a storage Secret's record with its summary (helmSummaryKey), or
// with nothing when the record does not decode: the cache keeps a few hundred bytes of each.
func summarizeHelmSecret(obj any) (any, error) {
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	rev, err := decodeHelmRecord(sec.Data["release"])
	sec.Data, sec.ManagedFields, sec.Annotations = nil, nil, nil
	if err == nil {
		sec.Annotations = map[string]string{}
		for k, v := range map[string]string{"name": rev.Name, "namespace": rev.Namespace, "version": strconv.Itoa(rev.Version),
			"status": rev.Status, "chart": rev.ChartName, "chartVersion": rev.ChartVersion, "firstDeployed": rev.FirstDeployed,
			"lastDeployed": rev.LastDeployed} {
			sec.Annotations[helmSummaryPrefix+k] = v
		}
	}
	return sec, nil
}

// decodeHelmRecord reads a release record as Helm's storage writes it: base64 of (usually)
// gzipped JSON.
func decodeHelmRecord(data []byte) (helmRevision, error) {
	raw, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return helmRevision{}, fmt.Errorf("not Helm's release record: %w", err)
	}
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return helmRevision{}, err
		}
		if raw, err = io.ReadAll(io.LimitReader(gz, maxHelmRecord+1)); err != nil {
			return helmRevision{}, err
		}
		if len(raw) > maxHelmRecord {
			return helmRevision{}, errors.New("the release record of Helm's storage unzips to more than 16 MiB")
		}
	}
	var rec helmRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return helmRevision{}, fmt.Errorf("not Helm's release record: %w", err)
	}
	out := helmRevision{Name: rec.Name, Namespace: rec.Namespace, Version: rec.Version, Status: rec.Info.Status,
		ChartName: rec.Chart.Metadata.Name, ChartVersion: rec.Chart.Metadata.Version,
		FirstDeployed: rec.Info.FirstDeployed.UTC().Format(time.RFC3339), LastDeployed: rec.Info.LastDeployed.UTC().Format(time.RFC3339)}
	return out, nil
}

// cachedHelmRevision is the summary a cached storage Secret holds.
func cachedHelmRevision(sec *corev1.Secret) (helmRevision, bool) {
	a := sec.Annotations
	version, err := strconv.Atoi(a[helmSummaryPrefix+"version"])
	if err != nil {
		return helmRevision{}, false
	}
	return helmRevision{Name: a[helmSummaryPrefix+"name"], Namespace: a[helmSummaryPrefix+"namespace"], Version: version,
		Status: a[helmSummaryPrefix+"status"], ChartName: a[helmSummaryPrefix+"chart"], ChartVersion: a[helmSummaryPrefix+"chartVersion"],
		FirstDeployed: a[helmSummaryPrefix+"firstDeployed"], LastDeployed: a[helmSummaryPrefix+"lastDeployed"]}, true
}

// optikonStatus is a Helm 4 status in Optikon's words: Helm 2's status codes, which its UI and
// API were written against.
func optikonStatus(status string) string {
	switch status {
	case "deployed":
		return "DEPLOYED"
	case "uninstalled":
		return "DELETED"
	case "superseded":
		return "SUPERSEDED"
	case "failed":
		return "FAILED"
	case "uninstalling":
		return "DELETING"
	case "pending-install":
		return "PENDING_INSTALL"
	case "pending-upgrade":
		return "PENDING_UPGRADE"
	case "pending-rollback":
		return "PENDING_ROLLBACK"
	}
	return "UNKNOWN"
}
