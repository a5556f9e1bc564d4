package helmrelease

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// storageSecret is a storage Secret as Helm writes it, of the JSON record.
func storageSecret(t *testing.T, record []byte) *corev1.Secret {
	t.Helper()
	var zipped bytes.Buffer
	gz := gzip.NewWriter(&zipped)
	_, err := gz.Write(record)
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "sh.helm.release.v1.web.v3"},
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(zipped.Bytes()))}}
}

// A storage record says its revision; one that unzips past the bound, or is not one, is an
// error naming the Secret, and nothing of a record's values reaches its Revision.
func TestStoredRevision(t *testing.T) {
	rev, err := StoredRevision(storageSecret(t, []byte(`{"name":"web","namespace":"apps","version":3,"info":{"status":"deployed",`+
		`"first_deployed":"2026-11-28T10:00:00Z","last_deployed":"2026-11-29T10:00:00+01:00"},"chart":{"metadata":{"name":"web","version":"1.2.0"}},"config":{"replicas":2}}`)))
	require.NoError(t, err)
	require.Equal(t, "web", rev.Name)
	require.Equal(t, 3, rev.Version)
	require.Equal(t, "deployed", rev.Status)
	require.Equal(t, "1.2.0", rev.ChartVersion)
	require.True(t, rev.LastDeployed.Equal(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)), rev.LastDeployed)

	bomb := append([]byte(`{"name":"`), bytes.Repeat([]byte("a"), MaxRecordSize+1)...)
	for name, sec := range map[string]*corev1.Secret{"a bomb": storageSecret(t, bomb), "not JSON": storageSecret(t, []byte("nope")),
		"not base64": {ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "sh.helm.release.v1.web.v3"}, Data: map[string][]byte{"release": []byte("%%%")}}} {
		_, err := StoredRevision(sec)
		require.ErrorContains(t, err, "apps/sh.helm.release.v1.web.v3", name)
	}
}
