package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// DescribeReleaseOptions are describe release's arguments: Complete takes them, Run prints.
type DescribeReleaseOptions struct {
	name    string
	factory *factory
	out     io.Writer
}

var (
	describeReleaseLong = `describe release shows one Release as a person reads it: what it delivers and where, its
rollout, drift and deletion policies, the revision and wave it stands at, its conditions, and a row
per member from its status slices: the member's phase, the revision it runs, why it is where it is,
when it was last applied, and the objects that are not healthy there; then what spec.feedback read
on each member, and each member's shares of spec.divide (the replicas it was applied with).`

	describeReleaseExample = `  # The web release of the fleet cluster set, member by member
  clusterregistry describe release web -n fleet`
)

func newDescribeRelease(f *factory) *cobra.Command {
	o := &DescribeReleaseOptions{}
	return &cobra.Command{
		Use:     "release NAME [-n NAMESPACE]",
		Aliases: []string{"releases", "rrel"},
		Short:   "Show a Release in full: source, placement, policies, conditions, a row per member",
		Long:    describeReleaseLong,
		Example: describeReleaseExample,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE:    runOptions(f, o),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return releaseNames(f), cobra.ShellCompDirectiveNoFileComp
		},
	}
}

// Complete takes the name.
func (o *DescribeReleaseOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.name, o.factory, o.out = args[0], f, cmd.OutOrStdout()
	return nil
}

// Validate has nothing to refuse that cobra did not.
func (o *DescribeReleaseOptions) Validate() error {
	if o.name == "" {
		return usageError{errors.New("a Release's name is required")}
	}
	return nil
}

// Run reads the Release and its slices, and prints them.
func (o *DescribeReleaseOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	api := reg.Clusters.ClusterregistryV1alpha1()
	rel, err := api.Releases(reg.Namespace).Get(ctx, o.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// A mistyped -n: say so, as get releases does, not that the release is missing.
		if err := reg.ClusterSetExists(ctx, reg.Namespace); err != nil {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("release %s/%s: %w", reg.Namespace, o.name, err)
	}
	slices, err := api.ReleaseStatusSlices(reg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{v1alpha1.ReleaseLabel: rel.Name}.String()})
	if err != nil {
		return fmt.Errorf("the status slices of release %s/%s: %w", reg.Namespace, o.name, err)
	}
	return describeRelease(o.out, rel, v1alpha1.MembersOf(rel, slices.Items), time.Now())
}

// describeRelease writes rel and its members' rows.
func describeRelease(out io.Writer, rel *v1alpha1.Release, members []v1alpha1.ReleaseMemberStatus, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	esc := printers.EscapeTerminal
	fmt.Fprintf(w, "Name:\t%s\n", rel.Name)
	fmt.Fprintf(w, "Namespace:\t%s\n", rel.Namespace)
	fmt.Fprintf(w, "Placement:\t%s\n", esc(releasePlacement(rel)))
	describeDependencies(w, rel)
	describeSource(w, rel)
	fmt.Fprintf(w, "Target Namespace:\t%s\n", esc(rel.TargetNamespaceOrDefault()))
	describeRollout(w, rel)
	fmt.Fprintf(w, "Deletion:\t%s\n", cmp.Or(rel.Spec.DeletionPolicy, v1alpha1.DeletionDelete))
	if rel.Spec.Suspend {
		fmt.Fprintf(w, "Suspended:\ttrue\n")
	}
	fmt.Fprintf(w, "Revision:\t%s (generation %d, status of %d)\n", orDash(rel.Status.Revision), rel.Generation, rel.Status.ObservedGeneration)
	if rel.Status.Waves > 0 {
		fmt.Fprintf(w, "Wave:\t%d of %d\n", rel.Status.Wave, rel.Status.Waves)
	}
	var phases []string
	for _, p := range rel.Status.Phases {
		phases = append(phases, fmt.Sprintf("%s=%d", p.Phase, p.Count))
	}
	fmt.Fprintf(w, "Members:\t%d, %d ready (%s)\n", rel.Status.Members, rel.Status.Ready, orDash(strings.Join(phases, ", ")))
	if rel.DeletionTimestamp != nil {
		fmt.Fprintf(w, "Deleting:\tsince %s; the members' objects are removed first\n", rel.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	describeConditions(w, rel, now)
	describeMembers(w, members, now)
	return w.Flush()
}

// describeSource says what rel delivers, and the chart its status says was delivered.
func describeSource(w io.Writer, rel *v1alpha1.Release) {
	esc := printers.EscapeTerminal
	switch src := rel.Spec.Source; {
	case src.ConfigMap != nil && src.ConfigMap.Key != "":
		fmt.Fprintf(w, "Source:\tConfigMap %s, key %s\n", esc(src.ConfigMap.Name), esc(src.ConfigMap.Key))
	case src.ConfigMap != nil:
		fmt.Fprintf(w, "Source:\tConfigMap %s, every key\n", esc(src.ConfigMap.Name))
	case src.Chart != nil && src.Chart.Repository != nil:
		r := src.Chart.Repository
		from := r.URL
		if r.Chart != "" {
			from = r.Chart + " from " + r.URL
		}
		pinned := ""
		if r.Digest != "" {
			pinned = ", digest pinned"
		}
		fmt.Fprintf(w, "Source:\tchart %s, version %s%s\n", esc(from), cmp.Or(esc(r.Version), "the newest"), pinned)
	case src.Chart != nil && src.Chart.Secret != nil:
		fmt.Fprintf(w, "Source:\tchart in Secret %s, key %s\n", esc(src.Chart.Secret.Name), cmp.Or(esc(src.Chart.Secret.Key), "chart.tgz"))
	case src.Chart != nil && src.Chart.ConfigMap != nil:
		fmt.Fprintf(w, "Source:\tchart in ConfigMap %s, key %s\n", esc(src.Chart.ConfigMap.Name), cmp.Or(esc(src.Chart.ConfigMap.Key), "chart.tgz"))
	default:
		fmt.Fprintf(w, "Source:\t%d manifests, inline\n", len(src.Manifests))
	}
	if c := rel.Status.Chart; c != nil {
		fmt.Fprintf(w, "Chart:\t%s %s (%s)\n", esc(c.Name), esc(c.Version), esc(c.Digest))
	}
	if src := rel.Spec.Source.Chart; src != nil {
		if src.Mode == v1alpha1.ChartModeHelm {
			fmt.Fprintf(w, "Chart Mode:\tHelm (Helm's own install on each member; helm ls there shows it)\n")
		} else {
			fmt.Fprintf(w, "Chart Mode:\tRender (rendered here, applied as manifests)\n")
		}
	}
}

// describeRollout says how rel rolls out and what it does about drift.
func describeRollout(w io.Writer, rel *v1alpha1.Release) {
	esc := printers.EscapeTerminal
	rollout := "All"
	if r := rel.Spec.Rollout; r != nil {
		parts := []string{string(cmp.Or(r.Strategy, v1alpha1.RolloutAll))}
		if r.MaxConcurrency != nil {
			parts = append(parts, "maxConcurrency "+r.MaxConcurrency.String())
		}
		if r.MaxFailures != nil {
			parts = append(parts, "maxFailures "+r.MaxFailures.String())
		}
		if r.SoakSeconds > 0 {
			parts = append(parts, fmt.Sprintf("soak %ds", r.SoakSeconds))
		}
		if r.ProgressDeadlineSeconds != nil {
			parts = append(parts, fmt.Sprintf("deadline %ds", *r.ProgressDeadlineSeconds))
		}
		rollout = strings.Join(parts, ", ")
	}
	fmt.Fprintf(w, "Rollout:\t%s\n", rollout)
	drift := "Correct"
	if d := rel.Spec.Drift; d != nil {
		drift = string(cmp.Or(d.Policy, v1alpha1.DriftCorrect))
		for _, ig := range d.Ignore {
			drift += fmt.Sprintf("; ignoring %s of %s", esc(strings.Join(ig.Paths, ",")), esc(strings.Trim(ig.Kind+"."+ig.Group, ".")))
		}
	}
	fmt.Fprintf(w, "Drift:\t%s\n", drift)
}

// describeConditions lists rel's conditions.
func describeConditions(w io.Writer, rel *v1alpha1.Release, now time.Time) {
	esc := printers.EscapeTerminal
	fmt.Fprintln(w, "Conditions:")
	if len(rel.Status.Conditions) == 0 {
		fmt.Fprintln(w, "  (none: the releases controller has not reported)")
	} else {
		fmt.Fprintln(w, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, c := range rel.Status.Conditions {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, esc(c.Reason), duration.HumanDuration(now.Sub(c.LastTransitionTime.Time)), esc(c.Message))
		}
	}
}

// describeMembers writes a row per member, the worst object's health in its message, then what
// spec.feedback read there.
func describeMembers(w io.Writer, members []v1alpha1.ReleaseMemberStatus, now time.Time) {
	esc := printers.EscapeTerminal
	fmt.Fprintln(w, "Per member:")
	if len(members) == 0 {
		fmt.Fprintln(w, "  (none reported)")
		return
	}
	slices.SortFunc(members, func(a, b v1alpha1.ReleaseMemberStatus) int { return cmp.Compare(a.Cluster, b.Cluster) })
	fmt.Fprintln(w, "  CLUSTER\tPHASE\tREVISION\tREASON\tLAST APPLIED\tMESSAGE")
	for _, m := range members {
		applied := "-"
		if m.LastApplied != nil {
			applied = duration.HumanDuration(now.Sub(m.LastApplied.Time)) + " ago"
		}
		msg := m.Message
		for _, o := range m.Objects {
			if o.Status != "" && o.Status != "Current" && !strings.Contains(msg, o.Name) {
				msg = strings.TrimSpace(msg + "; " + o.Kind + " " + strings.Trim(o.Namespace+"/"+o.Name, "/") + " " + o.Status)
			}
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", esc(m.Cluster), m.Phase, orDash(m.Revision), orDash(esc(m.Reason)), applied, orDash(esc(strings.TrimPrefix(msg, "; "))))
	}
	describeFeedback(w, members)
	describeShares(w, members)
}

// describeDependencies names the Releases rel depends on, if any, as text.
func describeDependencies(w io.Writer, rel *v1alpha1.Release) {
	if len(rel.Spec.DependsOn) == 0 {
		return
	}
	var names []string
	for _, d := range rel.Spec.DependsOn {
		names = append(names, printers.EscapeTerminal(d.Name))
	}
	fmt.Fprintf(w, "Depends on:\t%s\n", strings.Join(names, ", "))
}

// describeFeedback writes what spec.feedback read on each member, if anything, as text.
func describeFeedback(w io.Writer, members []v1alpha1.ReleaseMemberStatus) {
	if !slices.ContainsFunc(members, func(m v1alpha1.ReleaseMemberStatus) bool { return len(m.Feedback) > 0 }) {
		return
	}
	esc := printers.EscapeTerminal
	fmt.Fprintln(w, "Feedback:")
	for _, m := range members {
		var values []string
		for _, f := range m.Feedback {
			values = append(values, esc(f.Name)+"="+esc(f.Value))
		}
		fmt.Fprintf(w, "  %s\t%s\n", esc(m.Cluster), orDash(strings.Join(values, ", ")))
	}
}

// describeShares writes each member's shares of spec.divide, as it was last applied with them,
// if any has one.
func describeShares(w io.Writer, members []v1alpha1.ReleaseMemberStatus) {
	if !slices.ContainsFunc(members, func(m v1alpha1.ReleaseMemberStatus) bool { return len(m.Shares) > 0 }) {
		return
	}
	fmt.Fprintln(w, "Shares (spec.divide):")
	for _, m := range members {
		var shares []string
		for _, s := range m.Shares {
			shares = append(shares, fmt.Sprintf("%s=%d", printers.EscapeTerminal(s.Name), s.Replicas))
		}
		fmt.Fprintf(w, "  %s\t%s\n", printers.EscapeTerminal(m.Cluster), orDash(strings.Join(shares, ", ")))
	}
}
