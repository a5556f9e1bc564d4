package fleetcache

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A list the member refused (as the reflector wraps it) is Refused; other failures, and a synced
// or stale cache, are not.
func TestStatusRefused(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	forbidden := fmt.Errorf("failed to list *v1.Node: %w", apierrors.NewForbidden(nodes, "", errors.New(`cannot list resource "nodes"`)))
	unauthorized := fmt.Errorf("failed to list *v1.Node: %w", apierrors.NewUnauthorized("token expired"))
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, tc := range []struct {
		st   Status
		want bool
	}{
		{Status{State: Syncing, Err: forbidden}, true},
		{Status{State: Syncing, Err: unauthorized}, true},
		{Status{State: Syncing, Err: refused}, false},
		{Status{State: Syncing}, false},
		{Status{State: Stale, Err: forbidden}, false},
		{Status{State: Synced}, false},
	} {
		require.Equal(t, tc.want, tc.st.Refused(), "%v", tc.st)
	}
}
