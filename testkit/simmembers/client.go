package simmembers

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/cluster-registry/sdk/access"
)

// Resolver resolves the simulated members' Clusters (see Clusters) with their fixed token.
func Resolver(tb testing.TB) *access.Resolver {
	tb.Helper()
	r, err := NewResolver()
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// NewResolver is Resolver for a process with no testing.TB: a replica a benchmark runs as a
// process of its own.
func NewResolver() (*access.Resolver, error) {
	return access.NewResolver(access.ResolverOptions{ClientIP: netip.MustParseAddr("127.0.0.1"), Providers: map[string]access.Provider{
		ProviderType: access.ProviderFunc(func(context.Context, *access.Request) (*access.Credentials, error) {
			return &access.Credentials{BearerToken: Token}, nil
		}),
	}})
}

// SettledHeapAndGoroutines reads the live heap and goroutine count once finished goroutines have
// exited and garbage has been collected, for benchmarks that report memory per member.
func SettledHeapAndGoroutines() (heap uint64, goroutines int) {
	prev := -1
	for range 50 {
		runtime.GC()
		if g := runtime.NumGoroutine(); g == prev {
			break
		} else {
			prev = g
		}
		time.Sleep(10 * time.Millisecond)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}
