package clusterprofile

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The manifest CRDManifest names is the one of the cluster-inventory-api version go.mod requires.
func TestCRDManifestMatchesGoMod(t *testing.T) {
	data, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/cluster-inventory-api (v\S+)`).FindSubmatch(data)
	require.NotNil(t, m, "go.mod does not require sigs.k8s.io/cluster-inventory-api")
	require.True(t, strings.Contains(CRDManifest, "/"+string(m[1])+"/"), "CRDManifest %s is not of %s", CRDManifest, m[1])
}
