package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// dryRunFlag is --dry-run as kubectl takes it: "none", or the one strategy a subcommand honours
// ("client": it checks what it can and says what it would do, changing nothing; "server": the
// registry checks each change without making it). A bare --dry-run means that strategy. Each
// subcommand that takes it parses it here.
type dryRunFlag struct {
	value    string
	strategy string // "client" or "server"
	// refusals explain why a strategy the subcommand does not honour is refused.
	refusals map[string]string
}

// addDryRunFlag adds --dry-run to cmd, honouring strategy.
func addDryRunFlag(cmd *cobra.Command, strategy, usage string, refusals map[string]string) *dryRunFlag {
	d := &dryRunFlag{strategy: strategy, refusals: refusals}
	cmd.Flags().StringVar(&d.value, "dry-run", "none", fmt.Sprintf("%q %s; \"none\" makes the changes", strategy, usage))
	cmd.Flags().Lookup("dry-run").NoOptDefVal = strategy
	return d
}

// enabled reports whether the run is a dry run, or a usage error for a value it does not take.
func (d *dryRunFlag) enabled() (bool, error) {
	switch d.value {
	case "none":
		return false, nil
	case d.strategy:
		return true, nil
	}
	if why, ok := d.refusals[d.value]; ok {
		return false, usageError{fmt.Errorf("--dry-run=%s: %s", d.value, why)}
	}
	return false, usageError{fmt.Errorf("--dry-run=%s: want %s or none", d.value, d.strategy)}
}
