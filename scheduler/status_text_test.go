package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A policy's error goes into the Placement's status, which kubectl and the dashboard print: it
// is cut between characters (the scheduler's own copy cut a multi-byte character in half, making
// the status invalid UTF-8) and holds no control character of whoever wrote the policy.
func TestStatusMessagesAreSafeText(t *testing.T) {
	hostile := "cel: \x1b[2J\x1b]0;owned\x07" + strings.Repeat("é", 600)
	for _, o := range []outcome{{invalid: errors.New(hostile)}, {failed: errors.New(hostile)}} {
		st := statusOf(&v1alpha1.Placement{}, o, time.Now())
		require.NotEmpty(t, st.Conditions)
		for _, c := range st.Conditions {
			require.True(t, utf8.ValidString(c.Message), "%s: not UTF-8: %q", c.Type, c.Message)
			require.False(t, strings.ContainsFunc(c.Message, unicode.IsControl), "%s: %q", c.Type, c.Message)
			require.LessOrEqual(t, len(c.Message), 1000+len("; the decision last written is kept"))
		}
	}
}
