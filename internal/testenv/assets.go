package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// AssetsDir returns the directory holding kube-apiserver, etcd and kubectl: $KUBEBUILDER_ASSETS when
// set, otherwise what hack/build-testbins.sh --print reports. It never builds anything, so that
// parallel test binaries do not race to build the same files; a missing binary is an error that
// says which command to run.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, checkAssets(dir)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(filepath.Join(root, "hack", "build-testbins.sh"), "--print").Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(exitErr.Stderr)))
		}
		return "", fmt.Errorf("test binaries not found (run hack/build-testbins.sh, or the README's test command, first): %w", err)
	}
	dir := strings.TrimSpace(string(out))
	return dir, checkAssets(dir)
}

// Kubectl returns the path of the kubectl that hack/build-testbins.sh built.
func Kubectl() (string, error) {
	dir, err := AssetsDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kubectl"), nil
}

func checkAssets(dir string) error {
	for _, bin := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return fmt.Errorf("test binary %s missing from %s (run hack/build-testbins.sh): %w", bin, dir, err)
		}
	}
	return nil
}

// moduleRoot finds this module's root from the working directory, which go test sets to the
// package under test.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(data), "module github.com/cluster-registry/sdk\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the github.com/cluster-registry/sdk module root above the working directory")
		}
		dir = parent
	}
}
