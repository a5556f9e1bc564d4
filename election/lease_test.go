package election_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/election"
)

func TestDefaultedAndValidate(t *testing.T) {
	l := election.Lease{Namespace: "fleet-system", Name: "my-controller"}.Defaulted()
	require.NotEmpty(t, l.Identity)
	require.Equal(t, 15*time.Second, l.LeaseDuration)
	require.Equal(t, 10*time.Second, l.RenewDeadline)
	require.Equal(t, 2*time.Second, l.RetryPeriod)
	require.NoError(t, l.Validate())
	other := election.Lease{Namespace: "fleet-system", Name: "my-controller"}.Defaulted()
	require.NotEqual(t, l.Identity, other.Identity, "two replicas on one host got one identity")

	err := election.Lease{LeaseDuration: time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}.Validate()
	require.ErrorContains(t, err, "field Namespace is required")
	require.ErrorContains(t, err, "field Name is required")
	require.ErrorContains(t, err, "want RetryPeriod (1s) < RenewDeadline (2s) < LeaseDuration (1s)")
}

// Replicas of a tool's own controller take turns: work runs only while this replica leads.
func ExampleRun() {
	var cfg *rest.Config // the registry's
	kube := kubernetes.NewForConfigOrDie(cfg)
	err := election.Run(context.TODO(), kube.CoordinationV1(), election.Lease{Namespace: "fleet-system", Name: "my-controller"},
		logr.Discard(), func(ctx context.Context) error {
			<-ctx.Done() // work until the lead is lost or the process stops
			return nil
		})
	if errors.Is(err, election.ErrLostLeadership) {
		fmt.Println("another replica leads now; restarting to contend again")
	}
}
