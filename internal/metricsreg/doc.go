// Package metricsreg registers Prometheus collectors that replace those of an earlier run in the
// process (a controller made again: a restart, a test, a replica beside another), which would
// otherwise go on reporting what they last saw.
package metricsreg
