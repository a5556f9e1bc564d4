package delivery

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/cluster-registry/sdk/internal/safetext"
)

// health is an object's kstatus (Current, InProgress, Failed, Terminating, ...) and its message.
// kstatus compares a status's observedGeneration with the generation, so an object whose
// controller has not seen the newest spec yet is InProgress, not the Current it was.
func health(u *unstructured.Unstructured) (string, string) {
	res, err := status.Compute(u)
	if err != nil {
		return status.UnknownStatus.String(), safetext.OneLine(err.Error(), 1024)
	}
	return res.Status.String(), safetext.OneLine(res.Message, 1024)
}
