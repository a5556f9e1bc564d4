package optikon

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cluster-registry/sdk/helmrelease"
)

// helmSecret is a storage Secret as Helm writes it, of the JSON record.
func helmSecret(t *testing.T, record []byte) *corev1.Secret {
	t.Helper()
	var zipped bytes.Buffer
	gz := gzip.NewWriter(&zipped)
	_, err := gz.Write(record)
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	return &corev1.Secret{Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(zipped.Bytes()))}}
}

// A member's Helm record is summarized as it arrives: the chart and the values inside are
// dropped, what /v0/releases shows is kept; a record that unzips past the bound, or is not one, leaves nothing.
func TestHelmStorageSummary(t *testing.T) {
	record := []byte(`{"name":"web","namespace":"apps","version":3,"info":{"status":"pending-upgrade","first_deployed":"2026-11-28T10:00:00Z",` +
		`"last_deployed":"2026-11-29T10:00:00+01:00"},"chart":{"metadata":{"name":"web","version":"1.2.0"},"templates":[{"name":"t","data":"eA=="}]},"config":{"replicas":2}}`)
	obj, err := SummarizeHelmSecret(helmSecret(t, record))
	require.NoError(t, err)
	sec := obj.(*corev1.Secret)
	require.Nil(t, sec.Data, "the record, chart and all, kept in the cache")
	rev, ok := cachedHelmRevision(sec)
	require.True(t, ok)
	require.Equal(t, helmRevision{Name: "web", Namespace: "apps", Version: 3, Status: "pending-upgrade", ChartName: "web", ChartVersion: "1.2.0",
		FirstDeployed: "2026-11-28T10:00:00Z", LastDeployed: "2026-11-29T09:00:00Z"}, rev)
	for k, v := range sec.Annotations {
		require.NotContains(t, k+v, "replicas", "the member's values kept in the cache: they may come from Secrets the caller may not read")
	}
	require.Equal(t, "PENDING_UPGRADE", optikonStatus(rev.Status))

	bomb := append([]byte(`{"name":"`), bytes.Repeat([]byte("a"), helmrelease.MaxRecordSize+1)...)
	for name, sec := range map[string]*corev1.Secret{"a bomb": helmSecret(t, bomb), "not base64": {Data: map[string][]byte{"release": []byte("%%%")}},
		"not JSON": helmSecret(t, []byte("nope"))} {
		obj, err := SummarizeHelmSecret(sec)
		require.NoError(t, err, name)
		_, ok := cachedHelmRevision(obj.(*corev1.Secret))
		require.False(t, ok, name)
		require.Nil(t, obj.(*corev1.Secret).Data, name)
	}
}
