package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/printers"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/trustflags"
)

// DiffReleaseOptions are diff release's arguments and flags.
type DiffReleaseOptions struct {
	Filename string
	Trust    trustflags.Flags

	name    string
	factory *factory
	out     io.Writer
	errOut  io.Writer
}

func newDiff(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff release (NAME | -f FILE)",
		Short: "Show what delivering a Release would change on each member it is placed on",
		Long:  "diff shows what a change would do before it is made, as kubectl diff does. See diff release --help.",
		Example: `  # What this edit of web would change, member by member
  clusterregistry diff release -f web.yaml -n fleet`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newDiffRelease(f))
	return cmd
}

func newDiffRelease(f *factory) *cobra.Command {
	o := &DiffReleaseOptions{}
	cmd := &cobra.Command{
		Use:     "release (NAME | -f FILE)",
		Aliases: []string{"releases", "rrel"},
		Short:   "Show, per member, what delivering a Release (its next revision, or a file's) would change",
		Long: `diff release shows, for each member a Release's decision places it on, what delivering it would
change there, as kubectl diff shows it for one cluster: each object is dry-run applied on the member
with server-side apply as the releases controller applies it (the Release's field manager), and
the result is compared with what runs there, as a unified diff per object (a Secret's values
masked); objects the Release has there that it no longer would are shown as removed. Nothing is
written anywhere. A Release with spec.divide is diffed at each member's share of the decision's
members, and the share is said on standard error beside its diff ("member member-1: 3 of the 6
replicas of Deployment shop (spec.divide shop)").

-f FILE diffs a Release from a file (a change before it is applied to the registry); NAME diffs
the Release as the registry has it (its next revision, before its waves reach every member). The
members are reached as the releases controller reaches them: the trust flags apply.

Exit status, as kubectl diff's: 0 when nothing would change, 1 when something would, 2 on an
error (a member that refuses the dry run, one out of reach, a usage error).`,
		Example: `  # What this edit would change, member by member, before applying it
  clusterregistry diff release -f web.yaml -n fleet

  # What web's current spec still has to change on its members
  clusterregistry diff release web -n fleet`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: runOptions(f, o),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return releaseNames(f), cobra.ShellCompDirectiveNoFileComp
		},
	}
	cmd.Flags().StringVarP(&o.Filename, "filename", "f", "", "a file holding the Release to diff")
	o.Trust.AddFlags(cmd.Flags())
	return cmd
}

// Complete takes the name.
func (o *DiffReleaseOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		o.name = args[0]
	}
	o.factory, o.out, o.errOut = f, cmd.OutOrStdout(), cmd.ErrOrStderr()
	return nil
}

// Validate wants a name or a file, not both.
func (o *DiffReleaseOptions) Validate() error {
	if (o.name == "") == (o.Filename == "") {
		return usageError{errors.New("give a Release's NAME or -f FILE, one of them")}
	}
	if _, err := o.Trust.ResolverOptions(); err != nil {
		return usageError{err}
	}
	return nil
}

// Run diffs the Release on each member, in its decision's order.
func (o *DiffReleaseOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	rel, err := o.release(ctx, reg)
	if err != nil {
		return exitStatus{2, err}
	}
	in, err := delivery.ReadInputs(ctx, reg.Kube, nil, rel)
	if err != nil {
		return exitStatus{2, fmt.Errorf("release %s/%s: %w", rel.Namespace, rel.Name, err)}
	}
	b, err := delivery.Render(rel, in)
	if err != nil {
		return exitStatus{2, fmt.Errorf("release %s/%s: %w", rel.Namespace, rel.Name, err)}
	}
	profiles, err := cpversioned.NewForConfig(reg.Config)
	if err != nil {
		return exitStatus{2, err}
	}
	dec, err := decision.Read(ctx, profiles, rel.Namespace, rel.DecisionKey())
	if err != nil {
		return exitStatus{2, fmt.Errorf("release %s/%s: its placement's decision: %w", rel.Namespace, rel.Name, err)}
	}
	resolver, err := o.resolver(reg)
	if err != nil {
		return exitStatus{2, err}
	}
	clusters, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(rel.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return exitStatus{2, fmt.Errorf("release %s/%s: its cluster set's Clusters: %w", rel.Namespace, rel.Name, err)}
	}
	current := o.currentObjects(ctx, reg, rel)
	results := diffMembers(ctx, resolver, rel, b, dec.Clusters, clusters.Items, current)
	changed, failedObjects, failedMembers := false, 0, 0
	for i, k := range dec.Clusters {
		diffs, err := results[i].diffs, results[i].err
		if err != nil {
			failedMembers++
			fmt.Fprintf(o.errOut, "error: member %s: %s\n", k.Name, printers.EscapeTerminal(err.Error()))
			continue
		}
		printShares(o.errOut, rel, k.Name, results[i].shares)
		failedHere := 0
		for _, d := range diffs {
			if d.Changed() {
				changed = true
				if d.Err != "" {
					failedHere++
					fmt.Fprintf(o.errOut, "error: member %s: %s: %s\n", k.Name, d.Object, printers.EscapeTerminal(d.Err))
					continue
				}
				printDiff(o.out, k.Name, d)
			}
		}
		if failedHere > 0 {
			failedObjects += failedHere
			failedMembers++
		}
	}
	switch {
	case failedMembers > 0:
		return exitStatus{2, fmt.Errorf("the dry run failed on %d of %d members (%d objects; above)", failedMembers, len(dec.Clusters), failedObjects)}
	case changed:
		return exitStatus{1, nil}
	}
	return nil
}

// release is the Release to diff: from the file, in -n's namespace unless it names its own, or
// from the registry.
func (o *DiffReleaseOptions) release(ctx context.Context, reg *registry) (*v1alpha1.Release, error) {
	if o.Filename == "" {
		return getRelease(ctx, reg, o.name)
	}
	data, err := os.ReadFile(o.Filename)
	if err != nil {
		return nil, err
	}
	var rel v1alpha1.Release
	if err := yaml.UnmarshalStrict(data, &rel); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Filename, err)
	}
	if rel.Kind != "Release" || rel.APIVersion != v1alpha1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("%s: holds %s %s, want a Release of %s", o.Filename, rel.APIVersion, rel.Kind, v1alpha1.SchemeGroupVersion)
	}
	if rel.Namespace == "" {
		rel.Namespace = reg.Namespace
	}
	if rel.Name == "" {
		return nil, fmt.Errorf("%s: the Release has no metadata.name", o.Filename)
	}
	return &rel, nil
}

// currentObjects are the objects the Release (as the registry has it) has on each member, by
// member: what a new revision would prune.
func (o *DiffReleaseOptions) currentObjects(ctx context.Context, reg *registry, rel *v1alpha1.Release) map[string][]v1alpha1.ReleaseObjectStatus {
	out := map[string][]v1alpha1.ReleaseObjectStatus{}
	have, err := reg.Clusters.ClusterregistryV1alpha1().Releases(rel.Namespace).Get(ctx, rel.Name, metav1.GetOptions{})
	if err != nil {
		return out // not in the registry yet: nothing to prune
	}
	slices, err := reg.Clusters.ClusterregistryV1alpha1().ReleaseStatusSlices(rel.Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=" + rel.Name})
	if err != nil {
		return out
	}
	for _, m := range v1alpha1.MembersOf(have, slices.Items) {
		out[m.Cluster] = m.Objects
	}
	return out
}

// diffConcurrency is how many members diff release dry-runs at once: a member's diff waits on
// its discovery and dry runs, not on this process.
const diffConcurrency = 16

// memberDiff is one member's diffs, or why it has none.
type memberDiff struct {
	diffs  []delivery.ObjectDiff
	shares []v1alpha1.ReleaseMemberShare // its shares of spec.divide
	err    error
}

// diffMembers diffs the Release on each of members, diffConcurrency at a time, in their order.
func diffMembers(ctx context.Context, resolver *access.Resolver, rel *v1alpha1.Release, b *delivery.Bundle,
	members []types.NamespacedName, clusters []v1alpha1.Cluster, current map[string][]v1alpha1.ReleaseObjectStatus) []memberDiff {
	byName := map[string]*v1alpha1.Cluster{}
	for i := range clusters {
		byName[clusters[i].Name] = &clusters[i]
	}
	b = b.DividedAmong(members, func(k types.NamespacedName) *v1alpha1.Cluster { return byName[k.Name] })
	out := make([]memberDiff, len(members))
	var g errgroup.Group
	g.SetLimit(diffConcurrency)
	for i, k := range members {
		g.Go(func() error {
			cluster := byName[k.Name]
			if cluster == nil {
				out[i].err = fmt.Errorf("no Cluster %s in cluster set %s", k.Name, rel.Namespace)
				return nil
			}
			cfg, err := resolver.Config(ctx, cluster)
			if err != nil {
				out[i].err = err
				return nil
			}
			out[i].shares = b.SharesFor(cluster)
			out[i].diffs, out[i].err = delivery.Diff(ctx, rel, b, cluster, cfg, "", current[k.Name])
			return nil
		})
	}
	_ = g.Wait()
	return out
}

// resolver reaches members as the trust flags say, reading each Secret once per run: members
// that share a Secret cost the registry one read, not one each.
func (o *DiffReleaseOptions) resolver(reg *registry) (*access.Resolver, error) {
	opts, err := o.Trust.ResolverOptions()
	if err != nil {
		return nil, trustflags.InFlagTerms(err)
	}
	opts.Secrets, opts.UserAgent = secretsOnce(access.SecretsFromClient(reg.Kube)), "clusterregistry-diff"
	r, err := access.NewResolver(opts)
	return r, trustflags.InFlagTerms(err)
}

// secretsOnce reads each Secret through next once, then answers from what it read.
func secretsOnce(next access.SecretGetter) access.SecretGetter {
	var mu sync.Mutex
	read := map[types.NamespacedName]*corev1.Secret{}
	return access.SecretGetterFunc(func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
		key := types.NamespacedName{Namespace: namespace, Name: name}
		mu.Lock()
		s := read[key]
		mu.Unlock()
		if s != nil {
			return s, nil
		}
		s, err := next.GetSecret(ctx, namespace, name)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		read[key] = s
		mu.Unlock()
		return s, nil
	})
}

func printDiff(out io.Writer, member string, d delivery.ObjectDiff) {
	live, merged := member+"/LIVE/"+d.Object, member+"/MERGED/"+d.Object
	text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(d.Live), B: difflib.SplitLines(d.Merged),
		FromFile: live, ToFile: merged, Context: 3})
	fmt.Fprintf(out, "diff -u -N %s %s\n%s", live, merged, printers.EscapeTerminal(strings.TrimSuffix(text, "\n")+"\n"))
}

// printShares says, beside the diffs, each share of spec.divide the member would run: the diff
// shows a share only where it changes.
func printShares(out io.Writer, rel *v1alpha1.Release, member string, shares []v1alpha1.ReleaseMemberShare) {
	for _, s := range shares {
		for _, d := range rel.Spec.Divide {
			if d.Name == s.Name {
				fmt.Fprintf(out, "member %s: %d of the %d replicas of %s %s (spec.divide %s)\n", member, s.Replicas, d.Replicas, printers.EscapeTerminal(d.Kind), printers.EscapeTerminal(d.ObjectName), d.Name)
			}
		}
	}
}
