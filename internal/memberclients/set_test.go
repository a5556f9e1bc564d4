package memberclients

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// Each client is built once and then shared; the clientset speaks protobuf without changing the
// config the Set was given.
func TestSetBuildsEachClientOnce(t *testing.T) {
	cfg := &rest.Config{Host: "https://member.example.com"}
	s := New(cfg, &http.Client{}, runtime.NewScheme())
	kube, err := s.Kubernetes()
	require.NoError(t, err)
	again, err := s.Kubernetes()
	require.NoError(t, err)
	require.Same(t, kube, again)
	dyn, err := s.Dynamic()
	require.NoError(t, err)
	dynAgain, _ := s.Dynamic()
	require.Equal(t, dyn, dynAgain)
	meta, err := s.Metadata()
	require.NoError(t, err)
	require.NotNil(t, meta)
	require.Empty(t, cfg.ContentType, "the Set changed the config it was given")

	pb := Protobuf(cfg)
	require.Equal(t, runtime.ContentTypeProtobuf, pb.ContentType)
	require.Equal(t, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON, pb.AcceptContentTypes)
}
