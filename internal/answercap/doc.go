// Package answercap bounds how much of each answer from a member a client reads. client-go reads
// an answer whole into memory, so a member, or whoever answers at its endpoint, could exhaust a
// long-running controller's memory with one endless answer. Controllers whose requests have small
// answers by nature (health probes, token renewals) read through Wrap; clients built from a
// resolution with access.ResolverOptions.MaxAnswerBytes read through WrapExceptWatches, which
// bounds each event of a watch rather than the watch.
package answercap
