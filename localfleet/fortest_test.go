package localfleet_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/localfleet"
)

// fatalTB records Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A fleet that cannot start fails the test at once, saying why.
func TestStartForTestFailsTheTest(t *testing.T) {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		localfleet.StartForTest(tb, localfleet.Options{Members: -1})
		t.Error("StartForTest returned after a failed start")
	}()
	<-done
	require.Equal(t, "starting a local fleet: localfleet: Members is -1, want zero or more", tb.fatal)
}
