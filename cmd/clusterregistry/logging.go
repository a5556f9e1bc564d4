package main

import (
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// commandLogger is the one logger of a long-running subcommand (health, rotate): logr's
// key="value" lines with a timestamp, on w. What client-go (leader election, informers) and
// controller-runtime log goes through it too, so that every line has one format, rather than
// klog's "I1126 00:18:37.816718 ..." among logr's. verbose adds V(1): every probe's outcome.
func commandLogger(w io.Writer, verbose bool) logr.Logger {
	level := 0
	if verbose {
		level = 1
	}
	logger := funcr.New(func(prefix, args string) {
		if prefix != "" {
			// The logger's name (rotation, leaderelection, ...) is one more field, so that every
			// line begins with its time.
			fmt.Fprintf(w, "%s \"logger\"=%q\n", args, prefix)
			return
		}
		fmt.Fprintln(w, args)
	}, funcr.Options{Verbosity: level, LogTimestamp: true})
	klog.SetLogger(logger)
	ctrllog.SetLogger(logger)
	return logger
}
