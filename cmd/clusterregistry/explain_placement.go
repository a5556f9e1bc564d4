package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/placement"
)

// ExplainPlacementOptions are explain-placement's flags: Complete reads and compiles the policy
// file, Validate has nothing left to check, Run decides against the registry's Clusters and
// prints every candidate with its reason. Nothing is written.
type ExplainPlacementOptions struct {
	// Name, if set, is the Placement whose policy is explained, against its own decision.
	Name          string
	File          string
	AllNamespaces bool
	// Decision, if set, is the decision key of the PlacementDecisions to take as the previous
	// decision: the dry run then shows what would be kept and what would change.
	Decision string

	policy  *placement.Compiled
	rollout bool
	// lastRebalance is the named Placement's status.lastRebalanceTime, from which its
	// rebalance's cooldown counts.
	lastRebalance time.Time
	factory       *factory
	out           io.Writer
}

// Complete reads the policy file, refusing unknown fields, and compiles it.
func (o *ExplainPlacementOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.factory, o.out = f, cmd.OutOrStdout()
	if len(args) == 1 {
		o.Name = args[0]
	}
	switch {
	case o.Name != "" && o.File != "":
		return usageError{errors.New("a Placement NAME and -f/--filename conflict: explain one Placement, or one policy file")}
	case o.Name != "" && o.AllNamespaces:
		return usageError{errors.New("a Placement NAME and -A conflict: a Placement chooses among its own namespace's Clusters")}
	case o.Name != "":
		if o.Decision == "" {
			o.Decision = o.Name
		}
		return nil // read from the registry in Run
	case o.File == "":
		return usageError{errors.New("name a Placement, or give a policy file with -f/--filename")}
	}
	data, err := os.ReadFile(o.File)
	if err != nil {
		return fmt.Errorf("-f %s: %w", o.File, err)
	}
	p, what, err := readPolicy(data)
	if err != nil {
		return fmt.Errorf("-f %s: %w", o.File, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Explaining %s of %s.\n", what, o.File)
	if o.policy, err = placement.Compile(p); err != nil {
		return fmt.Errorf("-f %s: %w", o.File, err)
	}
	o.rollout = p.RolloutGroupSize != nil
	return nil
}

// readPolicy reads a policy file: a whole Placement (the README's example, as kubectl would
// apply it), whose spec is the policy, or the spec alone. Unknown fields are refused in both. what
// says which it was.
func readPolicy(data []byte) (policy placement.Policy, what string, err error) {
	var typed metav1.TypeMeta
	if err := yaml.Unmarshal(data, &typed); err != nil {
		return policy, "", err
	}
	if typed.Kind == "" && typed.APIVersion == "" {
		if err := yaml.UnmarshalStrict(data, &policy); err != nil {
			return policy, "", fmt.Errorf("%w (a policy file holds a Placement, or its spec alone)", err)
		}
		return policy, "the policy (a Placement's spec)", nil
	}
	if typed.Kind != "Placement" || typed.APIVersion != v1alpha1.SchemeGroupVersion.String() {
		return policy, "", fmt.Errorf("apiVersion %q, kind %q: want a Placement (apiVersion %s), or a Placement's spec alone",
			typed.APIVersion, typed.Kind, v1alpha1.SchemeGroupVersion)
	}
	var whole v1alpha1.Placement
	if err := yaml.UnmarshalStrict(data, &whole); err != nil {
		return policy, "", err
	}
	return whole.Spec, fmt.Sprintf("the spec of Placement %q", whole.Name), nil
}

// Validate has nothing to check that Complete did not.
func (o *ExplainPlacementOptions) Validate() error { return nil }

// Run lists the candidates, decides, and prints each with its reason.
func (o *ExplainPlacementOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	namespace := reg.Namespace
	key := reg.Namespace + "/" + o.Decision // as the scheduler seeds its ties
	if o.Name != "" {
		p, err := reg.Clusters.ClusterregistryV1alpha1().Placements(namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading Placement %s/%s: %w", namespace, o.Name, err)
		}
		if o.policy, err = placement.Compile(p.Spec); err != nil {
			return fmt.Errorf("the policy of Placement %s/%s cannot be used (it is Misconfigured; its decision is kept as last written): %w", namespace, o.Name, err)
		}
		o.rollout, key = p.Spec.RolloutGroupSize != nil, namespace+"/"+o.Name
		if t := p.Status.LastRebalanceTime; t != nil {
			o.lastRebalance = t.Time
		}
	}
	if o.AllNamespaces {
		namespace = metav1.NamespaceAll
	} else if err := reg.ClusterSetExists(ctx, namespace); err != nil {
		return err
	}
	list, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the registry's Clusters: %w", err)
	}
	in := placement.Input{Key: key, Now: time.Now(), LastRebalance: o.lastRebalance}
	for i := range list.Items {
		in.Candidates = append(in.Candidates, &list.Items[i])
	}
	if o.Decision != "" {
		if in.Previous, err = o.previous(ctx, reg.Config, reg.Namespace); err != nil {
			return err
		}
	}
	d := o.policy.Decide(in)
	return o.print(d)
}

// previous is what --decision says was chosen before, in its order; none when a Placement named
// with --name has not been decided yet.
func (o *ExplainPlacementOptions) previous(ctx context.Context, config *rest.Config, namespace string) ([]placement.Choice, error) {
	profiles, err := cpversioned.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	var choices []placement.Choice
	previous, err := decision.Read(ctx, profiles, namespace, o.Decision)
	switch {
	case errors.Is(err, decision.ErrNoDecision) && o.Name != "":
		// Not decided yet: explained as a first decision.
	case err != nil:
		return nil, fmt.Errorf("--decision %s: %w", o.Decision, err)
	}
	for _, c := range previous.Clusters {
		choices = append(choices, placement.Choice{Cluster: c, Group: previous.Groups[c]})
	}
	return choices, nil
}

// print writes a row per candidate, and a line that sums the decision up.
func (o *ExplainPlacementOptions) print(d placement.Decision) error {
	groups := map[string]int{}
	for _, ch := range d.Chosen {
		groups[ch.Cluster.String()] = ch.Group
	}
	w := printers.GetNewTabWriter(o.out)
	scores := o.policy.Prefers()
	header := []string{"CLUSTER", "CHOSEN"}
	if o.rollout {
		header = append(header, "GROUP")
	}
	if scores {
		header = append(header, "SCORE")
	}
	fmt.Fprintln(w, strings.Join(append(header, "REASON", "WHY"), "\t"))
	for _, e := range d.Explanations {
		chosen, group := "no", "-"
		if e.Reason.Chosen() {
			chosen, group = "yes", fmt.Sprint(groups[e.Cluster.String()])
		}
		cols := []string{e.Cluster.String(), chosen}
		if o.rollout {
			cols = append(cols, group)
		}
		if scores {
			cols = append(cols, scoreColumn(e.Score))
		}
		cols = append(cols, string(e.Reason), printers.EscapeTerminal(e.Message))
		fmt.Fprintln(w, strings.Join(cols, "\t"))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	summary := fmt.Sprintf("%d of %d candidates chosen", len(d.Chosen), len(d.Explanations))
	if !d.Satisfied {
		summary += "; fewer than the policy's count"
	}
	if !d.RecheckAt.IsZero() {
		summary += "; a toleration or a rebalance's cooldown ends at " + d.RecheckAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintln(o.out, summary)
	fmt.Fprintln(o.out, tolerationsLine(o.policy.Tolerations()))
	return nil
}

// scoreColumn is a candidate's score as the SCORE column shows it: "-" when it has none.
func scoreColumn(score *float64) string {
	if score == nil {
		return "-"
	}
	return placement.FormatScore(*score)
}

// tolerationsLine says how long a chosen member that is not Ready stays chosen, by reason,
// defaults included.
func tolerationsLine(ts []placement.Toleration) string {
	var parts []string
	for _, t := range ts {
		reason, how := cmp.Or(t.Reason, "any reason"), "as long as it lasts"
		if t.Seconds != nil {
			how = fmt.Sprintf("%ds", *t.Seconds)
		}
		parts = append(parts, reason+" "+how)
	}
	if len(parts) == 0 {
		return "a chosen member that is not Ready leaves at once"
	}
	return "a chosen member stays chosen while not Ready, counted from when it stopped being Ready: " + strings.Join(parts, ", ")
}

const explainPlacementLong = `Decide, as a dry run, which Clusters a Placement, or a placement policy, chooses, and say for
every candidate why it is in or out: one reason each (Chosen, Kept, Tolerated, Included;
Selector, CEL, Excluded, NotReady, OverCount, Spread, DoesNotFit, ResourcesUnknown,
ResourcesStale, Unscored, Rebalanced) and the words that explain it; with prefer, a SCORE
column (- for a candidate that could not be scored). Nothing is written. Its last line says how long a chosen member that is not Ready stays chosen, by
reason: the policy's tolerations, and for Unreachable, NotReady, Starting and AgentDisconnected, when none names
them, the default of 300 s (counted from when the member stopped being Ready, whatever reasons
it passes through).

explain-placement NAME explains the Placement NAME of the -n namespace against its own decision
(the PlacementDecisions of decision key NAME): what the scheduler would decide now, and why
each member is in or out. Scores are as they are now; the Placement's status.scores are those
its members were chosen by.

The policy file is YAML or JSON with the fields of a Placement's spec: selector, cel, include,
exclude, count, spread {label, maxSkew}, tolerations [{reason, seconds}], rolloutGroupSize,
fit {total, perNode}, prefer [{weight, cel}], maxResourceAgeSeconds, rebalance
{cooldownSeconds}. With --decision, the PlacementDecisions of that decision key (whoever wrote
them) are the previous decision: members chosen there and still fitting are Kept, and the dry
run shows what would change.`

const explainPlacementExample = `  # Why the web Placement chose what it chose
  clusterregistry explain-placement web -n fleet

  # Which production members would three web replicas go to, one per region where possible?
  cat > web.yaml <<EOF
  selector: {matchLabels: {env: prod}}
  count: 3
  spread: {label: topology.kubernetes.io/region}
  tolerations: [{reason: Unreachable, seconds: 300}]
  EOF
  clusterregistry explain-placement -n fleet -f web.yaml

  # The same, against what the web placement decided last
  clusterregistry explain-placement -n fleet -f web.yaml --decision web

  # Two members with 8 cpu free, the one with the most room first, and each one's score
  cat > roomy.yaml <<EOF
  count: 2
  fit: {total: {cpu: "8"}}
  prefer: [{weight: 10, cel: 'cluster.resources.free["cpu"] / cluster.resources.allocatable["cpu"]'}]
  EOF
  clusterregistry explain-placement -n fleet -f roomy.yaml`

func newExplainPlacement(fac *factory) *cobra.Command {
	o := &ExplainPlacementOptions{}
	cmd := &cobra.Command{
		Use:     "explain-placement (NAME | -f POLICY [-A]) [-n NAMESPACE] [--decision KEY]",
		Short:   "Show which Clusters a Placement (or a policy file) chooses, and why each is in or out (a dry run)",
		Long:    explainPlacementLong,
		Example: explainPlacementExample,
		Args:    usageArgs(cobra.MaximumNArgs(1)),
		RunE:    runOptions(fac, o),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return placementNames(fac), cobra.ShellCompDirectiveNoFileComp
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.File, "filename", "f", "", "the policy file (YAML or JSON): a whole Placement, or its spec alone")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "with -f: candidates from every namespace (cluster set)")
	f.StringVar(&o.Decision, "decision", "", "take the PlacementDecisions of this decision key (in -n's namespace) as the previous decision")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}
