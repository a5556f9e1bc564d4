package chartrepo_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/testkit/chartserve"
)

// push pushes a new small chart with Helm's registry client, returning its archive.
func push(t *testing.T, o *chartserve.OCIRegistry, name, version string) []byte {
	b := packagedChart(t, name, version)
	o.Push(t, b)
	return b
}

func TestOCIRegistryVersionsAndDigests(t *testing.T) {
	o := chartserve.NewOCIRegistry(t)
	v1 := push(t, o, "web", "1.0.0")
	v11 := push(t, o, "web", "1.1.0+build.7")
	push(t, o, "web", "2.0.0-rc.1")
	f := fetcherFor(o.RootCAs())
	url := "oci://" + o.Host() + "/charts/web"
	for _, c := range []struct {
		version, want string
		archive       []byte
	}{{"", "1.1.0+build.7", v11}, {"1.0.0", "1.0.0", v1}, {"<1.1", "1.0.0", v1}, {"1.1.0+build.7", "1.1.0+build.7", v11}} {
		ch, err := f.Fetch(context.Background(), chartrepo.Source{URL: url, Version: c.version})
		require.NoError(t, err, c.version)
		require.Equal(t, c.want, ch.Version, c.version)
		require.Equal(t, digestOf(c.archive), ch.Digest)
		require.Equal(t, c.archive, ch.Archive)
	}
	require.EqualValues(t, 2, f.Downloads())

	_, err := f.Fetch(context.Background(), chartrepo.Source{URL: url, Version: "1.0.0", Digest: digestOf(v11)})
	require.ErrorIs(t, err, chartrepo.ErrDigest)
	_, err = f.Fetch(context.Background(), chartrepo.Source{URL: url, Version: "9.9.9"})
	require.ErrorIs(t, err, chartrepo.ErrNotFound)
	_, err = f.Fetch(context.Background(), chartrepo.Source{URL: "oci://" + o.Host() + "/charts/none"})
	require.Error(t, err)
}

// A registry that wants a token gets one from its own token service with the credentials; a
// token service on another host is refused, and hears nothing (the credentials included).
func TestOCIRegistryTokenServiceOnItsOwnHostOnly(t *testing.T) {
	o := chartserve.NewOCIRegistry(t)
	v1 := push(t, o, "web", "1.0.0")
	o.RequireToken("reader", "pw")
	url := "oci://" + o.Host() + "/charts/web"
	creds := &chartrepo.Credentials{Username: "reader", Password: "pw"}

	f := fetcherFor(o.RootCAs())
	_, err := f.Fetch(context.Background(), chartrepo.Source{URL: url, Version: "1.0.0"})
	require.ErrorContains(t, err, "401")
	ch, err := f.Fetch(context.Background(), chartrepo.Source{URL: url, Version: "1.0.0", Credentials: creds})
	require.NoError(t, err)
	require.Equal(t, v1, ch.Archive)

	var elsewhere atomic.Int64
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Write([]byte(`{"token":"tok-reader"}`))
	}))
	defer other.Close()
	o.SetRealm(other.URL + "/token")
	_, err = fetcherFor(o.RootCAs()).Fetch(context.Background(), chartrepo.Source{URL: url, Version: "1.0.0", Credentials: creds})
	require.ErrorIs(t, err, chartrepo.ErrOtherHost)
	require.ErrorContains(t, err, other.URL+"/token")
	require.NotContains(t, err.Error(), "pw\"")
	require.Zero(t, elsewhere.Load())
}
