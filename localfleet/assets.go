package localfleet

import (
	"fmt"
	"os"
	"path/filepath"
)

// The versions hack/build-testbins.sh builds by default; AssetsDir looks for them in its cache.
const (
	KubernetesVersion = "v1.36.3"
	EtcdVersion       = "v3.6.16"
	// KwokVersion is the KWOK members with workloads run (Options.Workloads).
	KwokVersion = "v0.8.0"
	// KonnectivityVersion is the konnectivity agent (konnectivity-agent in the assets directory)
	// that the tunnel's tests run on members (package tunnel).
	KonnectivityVersion = "v0.34.0"
)

// buildCommand is what to run to get the binaries, from any module that requires the SDK.
const buildCommand = `bash "$(go list -m -f '{{.Dir}}' github.com/cluster-registry/sdk)/hack/build-testbins.sh"`

// AssetsDir returns the directory holding kube-apiserver, etcd and kubectl: dir when it is not
// empty, else $KUBEBUILDER_ASSETS when set, else the cache hack/build-testbins.sh fills
// ($CLUSTER_REGISTRY_SDK_CACHE, or cluster-registry-sdk under the user cache directory). It builds
// nothing, so that test binaries running in parallel never race to build the same files; when
// kube-apiserver or etcd is missing the error says what to run.
func AssetsDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if dir == "" {
		root := os.Getenv("CLUSTER_REGISTRY_SDK_CACHE")
		if root == "" {
			cache, err := userCacheDir()
			if err != nil {
				return "", fmt.Errorf("finding the test binaries: set KUBEBUILDER_ASSETS: %w", err)
			}
			root = filepath.Join(cache, "cluster-registry-sdk")
		}
		dir = filepath.Join(root, "assets", "kubernetes-"+KubernetesVersion+"-etcd-"+EtcdVersion)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("test binary %s not found in %s; build it with %s, or set KUBEBUILDER_ASSETS: %w",
				bin, dir, buildCommand, err)
		}
	}
	return dir, nil
}

// userCacheDir is $XDG_CACHE_HOME or ~/.cache, as the build script has it, on every system:
// os.UserCacheDir would give ~/Library/Caches on macOS, where the script does not look.
func userCacheDir() (string, error) {
	if dir := os.Getenv("XDG_CACHE_HOME"); dir != "" {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache"), nil
}
