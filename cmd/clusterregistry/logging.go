package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// logOutput is where the process's library logging goes (see initLogging): the stderr of the
// subcommand that runs, os.Stderr before one does.
var logOutput atomic.Pointer[io.Writer]

var initLoggingOnce sync.Once

// initLogging sends what client-go (leader election, informers) and controller-runtime log through
// a logr logger of the command's format, so that every line has one format, rather than klog's
// "I1126 00:18:37.816718 ..." among logr's. It must run before anything logs: klog's and
// controller-runtime's loggers may be set only while nothing uses them (main calls it first).
func initLogging() {
	initLoggingOnce.Do(func() {
		stderr := io.Writer(os.Stderr)
		logOutput.CompareAndSwap(nil, &stderr)
		shared := newLogger(func() io.Writer { return *logOutput.Load() }, 0)
		klog.SetLogger(shared)
		ctrllog.SetLogger(shared)
	})
}

// commandLogger is the one logger of a long-running subcommand (health, rotate, controllers):
// logr's key="value" lines with a timestamp, on w, where the libraries' lines go too from now on.
// verbose adds V(1): every probe's outcome.
func commandLogger(w io.Writer, verbose bool) logr.Logger {
	initLogging()
	logOutput.Store(&w)
	level := 0
	if verbose {
		level = 1
	}
	return newLogger(func() io.Writer { return w }, level)
}

func newLogger(out func() io.Writer, level int) logr.Logger {
	return funcr.New(func(prefix, args string) {
		if prefix != "" {
			// The logger's name (rotation, leaderelection, ...) is one more field, so that every
			// line begins with its time.
			fmt.Fprintf(out(), "%s \"logger\"=%q\n", args, prefix)
			return
		}
		fmt.Fprintln(out(), args)
	}, funcr.Options{Verbosity: level, LogTimestamp: true})
}
