package optikon

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cluster-registry/sdk/helmrelease"
)

// fleet-api caches Helm's storage Secrets on every member (helmrelease.StorageSelector) and
// answers GET /v0/releases from them, as `helm ls` there would, with no request per poll. Each
// is summarized as it arrives (SummarizeHelmSecret): the record, with the whole chart inside, is
// dropped.

// helmSummaryPrefix prefixes the annotations in which a cached storage Secret keeps the summary
// the transform made of it: read per answer as strings, with no decoding.
const helmSummaryPrefix = "fleet-api.summary/"

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

// SummarizeHelmSecret, the Transform of fleet-api's cache of Helm storage, replaces a storage Secret's record with its summary (helmSummaryPrefix), or
// with nothing when the record does not decode: the cache keeps a few hundred bytes of each.
func SummarizeHelmSecret(obj any) (any, error) {
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	rev, err := helmrelease.StoredRevision(sec)
	sec.Data, sec.ManagedFields, sec.Annotations = nil, nil, nil
	if err == nil {
		sec.Annotations = map[string]string{}
		for k, v := range map[string]string{"name": rev.Name, "namespace": rev.Namespace, "version": strconv.Itoa(rev.Version),
			"status": rev.Status, "chart": rev.ChartName, "chartVersion": rev.ChartVersion,
			"firstDeployed": rev.FirstDeployed.UTC().Format(time.RFC3339), "lastDeployed": rev.LastDeployed.UTC().Format(time.RFC3339)} {
			sec.Annotations[helmSummaryPrefix+k] = v
		}
	}
	return sec, nil
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
