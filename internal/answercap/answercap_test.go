package answercap

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type answer string

func (a answer) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(string(a)))}, nil
}

func TestWrap(t *testing.T) {
	const limit = 4 << 10
	for _, tc := range []struct {
		size    int
		tooLong bool
	}{{limit, false}, {limit + 1, true}, {10, false}, {0, false}, {10 * limit, true}} {
		client := &http.Client{Transport: Wrap(limit)(answer(strings.Repeat("x", tc.size)))}
		resp, err := client.Get("https://member.example")
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		if !tc.tooLong {
			require.NoError(t, err, "size %d", tc.size)
			require.Len(t, data, tc.size)
			continue
		}
		require.ErrorIs(t, err, ErrTooLarge, "size %d", tc.size)
		require.EqualError(t, err, "the answer exceeds 4 KiB: answer too large")
		require.Len(t, data, limit)
	}
}

func TestWrapExceptWatches(t *testing.T) {
	const limit = 4 << 10
	long := answer(strings.Repeat("x", 2*limit))
	for url, whole := range map[string]bool{
		"https://member.example/api/v1/pods?watch=true":                 true,
		"https://member.example/api/v1/pods?resourceVersion=1&watch=1":  true,
		"https://member.example/api/v1/pods?watch=false":                false,
		"https://member.example/api/v1/pods":                            false,
		"https://member.example/api/v1/pods?labelSelector=watch%3Dtrue": false,
	} {
		client := &http.Client{Transport: WrapExceptWatches(limit)(long)}
		resp, err := client.Get(url)
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		if whole {
			require.NoError(t, err, url)
			require.Len(t, data, 2*limit, url)
		} else {
			require.ErrorIs(t, err, ErrTooLarge, url)
		}
	}
}
