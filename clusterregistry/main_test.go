package clusterregistry_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/cluster-registry/sdk/internal/testenv"
)

// env is the API server every test in this package shares; each test works in its own namespace.
var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping test API server:", err)
	}
	os.Exit(code)
}
