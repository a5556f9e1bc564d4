package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/delivery"
)

// RolloutHistoryOptions are rollout history's arguments and flags.
type RolloutHistoryOptions struct {
	Revision int64

	releaseTarget
}

func newRolloutHistory(f *factory) *cobra.Command {
	o := &RolloutHistoryOptions{}
	cmd := &cobra.Command{
		Use:   "history release/NAME [--revision N]",
		Short: "List a Release's revisions: number, change cause, hash, when its waves ran",
		Long: `history lists the revisions of a Release the releases controller recorded (the last
` + fmt.Sprint(delivery.HistoryLimit) + `), oldest first, as kubectl rollout history lists a Deployment's: each one's number, its
change cause (the kubernetes.io/change-cause annotation the Release had when it was rolled out), its
hash (the revision status and members' objects name), when it was first rolled out, and its waves
(how many began and finished). --revision N shows what revision N was made from.`,
		Example: `  clusterregistry rollout history release/web -n fleet
  clusterregistry rollout history release/web -n fleet --revision 3`,
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		RunE:              runOptions(f, o),
		ValidArgsFunction: rolloutCompletion(f),
	}
	cmd.Flags().Int64Var(&o.Revision, "revision", 0, "show the details of this revision")
	return cmd
}

// Validate refuses a negative revision.
func (o *RolloutHistoryOptions) Validate() error {
	if o.Revision < 0 {
		return usageError{fmt.Errorf("--revision %d: want 1 or more", o.Revision)}
	}
	return nil
}

// Run prints the history, or one revision.
func (o *RolloutHistoryOptions) Run(ctx context.Context) error {
	reg, rel, err := o.release(ctx)
	if err != nil {
		return err
	}
	history, err := delivery.History(ctx, reg.Kube, rel)
	if err != nil {
		return err
	}
	if o.Revision > 0 {
		for _, h := range history {
			if h.Number == o.Revision {
				return printRevision(o.out, o.name, h)
			}
		}
		return fmt.Errorf("release %s/%s: unable to find revision %d in its history", reg.Namespace, o.name, o.Revision)
	}
	return printHistory(o.out, o.name, history, time.Now())
}

// printHistory writes a Release's history as a table.
func printHistory(out io.Writer, name string, history []delivery.Revision, now time.Time) error {
	fmt.Fprintln(out, releaseRef(name))
	if len(history) == 0 {
		fmt.Fprintln(out, "No revisions recorded yet.")
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "REVISION\tHASH\tCREATED\tWAVES\tCHANGE-CAUSE")
	for _, h := range history {
		cause := h.ChangeCause
		if cause == "" {
			cause = "<none>"
		}
		fmt.Fprintf(w, "%d\t%s\t%s ago\t%s\t%s\n", h.Number, h.Hash, duration.HumanDuration(now.Sub(h.Created)), waves(h.Waves), printers.EscapeTerminal(cause))
	}
	return w.Flush()
}

// waves says how many of a revision's waves began and finished.
func waves(ws []delivery.WaveTimes) string {
	finished := 0
	for _, w := range ws {
		if w.Finished != nil {
			finished++
		}
	}
	return fmt.Sprintf("%d begun, %d finished", len(ws), finished)
}

// printRevision writes what one revision was made from, and its waves' times.
func printRevision(out io.Writer, name string, h delivery.Revision) error {
	fmt.Fprintf(out, "%s with revision #%d (%s)\n", releaseRef(name), h.Number, h.Hash)
	if h.ChangeCause != "" {
		fmt.Fprintf(out, "Change cause: %s\n", printers.EscapeTerminal(h.ChangeCause))
	}
	for _, w := range h.Waves {
		finished := "not finished"
		if w.Finished != nil {
			finished = "finished " + w.Finished.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(out, "Wave %d: started %s, %s\n", w.Wave, w.Started.UTC().Format(time.RFC3339), finished)
	}
	raw, err := yaml.Marshal(h.Record)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Made from:\n%s", printers.EscapeTerminal(indent(string(raw))))
	return nil
}

// indent indents each line of s by two spaces.
func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}
