// Package safetext makes text that others wrote (a member's answers, a Cluster's or a Secret's
// fields, errors quoting them) fit to store in status and to print in a table: printable, on one
// line where asked, and bounded, cut between characters.
package safetext
