package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/buildinfo"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/trustflags"
)

// fieldManager owns, on every member, the fields this tool applies.
const fieldManager = "fanout-deploy"

type options struct {
	registry  *genericclioptions.ConfigFlags // where the registry is
	namespace string                         // which cluster set
	selector  labels.Selector
	// placement, if set, is the decision key of the PlacementDecisions that choose the members,
	// instead of selector.
	placement                    string
	name, image, memberNamespace string
	replicas                     int
	concurrency, canaries        int
	timeout                      time.Duration
	dryRun, delete, skipNotReady bool
	wait                         bool
	trust                        trustflags.Flags
	// files are -f's; manifests what they hold. With them, the objects are applied instead of
	// the one Deployment of --name and --image.
	files     []string
	manifests []manifest
	// replicasGiven says --replicas was given: without it, a Deployment that exists keeps its
	// replicas.
	replicasGiven bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		for line := range strings.Lines(err.Error()) { // one line per bad flag
			fmt.Fprint(stderr, "fanout-deploy: ", strings.TrimSuffix(line, "\n"), "\n")
		}
		fmt.Fprintln(stderr, "Run fanout-deploy --help for the flags.")
		return 2
	}
	members, err := selectMembers(ctx, opts, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fanout-deploy:", err)
		return 1
	}

	verb := "Applying"
	if opts.delete {
		verb = "Deleting"
	}
	if opts.dryRun {
		verb += " (server dry run)"
	}
	what := fmt.Sprintf("Deployment %s/%s", opts.memberNamespace, opts.name)
	work := deployment(opts)
	if opts.manifests != nil {
		what = fmt.Sprintf("%d objects of %s", len(opts.manifests), strings.Join(opts.files, ", "))
		work = applyManifests(opts, opts.manifests)
	}
	chosen := ""
	if opts.placement != "" {
		chosen = fmt.Sprintf(" (placement %s)", opts.placement)
	}
	fmt.Fprintf(stdout, "%s %s on %d members of %s%s\n", verb, what, len(members), opts.namespace, chosen)

	done := 0
	fanOut := []multicluster.Option{multicluster.Concurrency(opts.concurrency), multicluster.Timeout(opts.timeout)}
	if opts.canaries > 0 {
		fanOut = append(fanOut, multicluster.Canary(opts.canaries))
	}
	if opts.skipNotReady {
		fanOut = append(fanOut, multicluster.SkipNotReady())
	}
	results := multicluster.Map(ctx, members, work, append(fanOut,
		// Progress: one line per member as it finishes. Calls come one at a time.
		multicluster.OnResult(func(o multicluster.Outcome) {
			done++
			fmt.Fprintf(stdout, "[%d/%d] %s %s\n", done, len(members), o.Member, progress(o))
		}),
	)...)
	return report(results, stdout, stderr)
}

// report prints the fan-out's table, what was skipped and each member's error in full, and
// returns the exit status: 1 when a member failed or was never started on.
func report(results multicluster.Results[string], stdout, stderr io.Writer) int {
	fmt.Fprintln(stdout)
	_ = results.WriteTable(stdout)
	if skipped := results.Skipped(); len(skipped) > 0 {
		fmt.Fprintf(stdout, "\nSkipped, not Ready (--skip-not-ready): %s\n", memberNames(skipped))
	}

	failed, notStarted := results.Failed(), results.NotStarted()
	if len(failed) > 0 {
		// The table cuts long errors to a line; the remedy is often at the end.
		fmt.Fprintln(stdout, "\nErrors:")
		for _, r := range failed {
			// A member's error quotes its API server; kubectl's escaping keeps its control
			// characters from driving the terminal (the table above does the same).
			fmt.Fprintf(stdout, "  %s: %s\n", r.Member, printers.EscapeTerminal(strings.ReplaceAll(r.Err.Error(), "\n", "\n    ")))
		}
	}
	if len(failed)+len(notStarted) == 0 {
		return 0
	}
	// The summary tells apart members where the change failed from members it never reached
	// (after a failed canary, or an interrupt): both leave the fleet unchanged there, so both
	// exit 1, but only the first needs looking at.
	var summary []string
	if len(failed) > 0 {
		summary = append(summary, fmt.Sprintf("%d of %d members failed: %s", len(failed), len(results), memberNames(failed)))
	}
	if len(notStarted) > 0 {
		why := strings.TrimPrefix(strings.TrimPrefix(notStarted[0].Err.Error(), multicluster.ErrNotStarted.Error()), ": ")
		summary = append(summary, fmt.Sprintf("%d not started (%s): %s", len(notStarted), why, memberNames(notStarted)))
	}
	fmt.Fprintf(stderr, "fanout-deploy: %s\n", strings.Join(summary, "; "))
	return 1
}

// progress is a member's line as it finishes: what happened, and for members that ran, how many
// attempts it took and how long.
func progress(o multicluster.Outcome) string {
	switch {
	case o.Skipped():
		return "skipped (not Ready)"
	case o.NotStarted():
		return "not started" // the table says why
	}
	status := "ok"
	if o.Err != nil {
		status = "FAILED" // the table below says why
	}
	attempts := "1 attempt"
	if o.Attempts != 1 {
		attempts = fmt.Sprintf("%d attempts", o.Attempts)
	}
	return fmt.Sprintf("%s (%s, %s)", status, attempts, o.Duration.Round(time.Millisecond))
}

func memberNames[T any](rs multicluster.Results[T]) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Member.String()
	}
	return strings.Join(names, ", ")
}

// selectMembers reads the selected Clusters from the registry and makes them a Fleet. A one-shot
// command lists once; a long-running tool would use multicluster.NewFleet to follow the registry.
func selectMembers(ctx context.Context, opts *options, warnings io.Writer) ([]*multicluster.Member, error) {
	config, err := opts.registry.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reaching the registry: %w", err)
	}
	if opts.namespace, _, err = opts.registry.ToRawKubeConfigLoader().Namespace(); err != nil {
		return nil, fmt.Errorf("reaching the registry: %w", err)
	}
	registry, err := versioned.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	var chosen *decision.Decision
	if opts.placement != "" {
		profiles, err := cpversioned.NewForConfig(config)
		if err != nil {
			return nil, err
		}
		if chosen, err = decision.Read(ctx, profiles, opts.namespace, opts.placement); err != nil {
			return nil, fmt.Errorf("--placement %s: %w", opts.placement, err)
		}
		if len(chosen.Refused) > 0 {
			// A decision may name its own cluster set's members only: following it elsewhere
			// would let whoever writes decisions here deploy, with our credentials, there.
			var refused []string
			for _, r := range chosen.Refused {
				refused = append(refused, r.Namespace+"/"+r.Name)
			}
			return nil, fmt.Errorf("--placement %s: the decision names ClusterProfiles outside namespace %s (%s); refusing to follow it",
				opts.placement, opts.namespace, strings.Join(refused, ", "))
		}
	}
	list, err := registry.ClusterregistryV1alpha1().Clusters(opts.namespace).List(ctx, metav1.ListOptions{LabelSelector: opts.selector.String()})
	if err != nil {
		return nil, fmt.Errorf("listing clusters in namespace %s of the registry at %s: %w", opts.namespace, config.Host, err)
	}
	if len(list.Items) == 0 {
		what := "no clusters in namespace " + opts.namespace
		if !opts.selector.Empty() {
			what += fmt.Sprintf(" match --selector %q", opts.selector)
		}
		return nil, fmt.Errorf("%s of the registry at %s; nothing to do", what, config.Host)
	}

	// Credentials are read from the registry with the caller's own permissions.
	secrets, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	resolver, err := opts.trust.ToResolver(secrets, fieldManager)
	if err != nil {
		return nil, err
	}
	members := multicluster.MembersOf(resolver, list.Items, multicluster.FleetOptions{})
	if chosen == nil {
		return members, nil
	}
	members, missing := chosen.Members(members)
	if len(missing) > 0 {
		fmt.Fprintf(warnings, "fanout-deploy: --placement %s names %d Clusters the registry does not have, skipped: %v\n", opts.placement, len(missing), missing)
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("--placement %s chooses no Cluster of namespace %s; nothing to do", opts.placement, opts.namespace)
	}
	return members, nil
}

// deployment applies (or deletes) the Deployment on one member; its value is the table's result.
func deployment(opts *options) func(context.Context, *multicluster.Member) (string, error) {
	var dryRun []string
	if opts.dryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	return func(ctx context.Context, m *multicluster.Member) (string, error) {
		kube, err := m.Kubernetes(ctx) // built once per member and shared
		if err != nil {
			return "", err
		}
		deployments := kube.AppsV1().Deployments(opts.memberNamespace)
		if opts.delete {
			err := deployments.Delete(ctx, opts.name, metav1.DeleteOptions{DryRun: dryRun})
			switch {
			case apierrors.IsNotFound(err):
				return "not found", nil
			case err != nil:
				return "", err
			case opts.dryRun:
				return "would be deleted (server dry run)", nil
			}
			return "deleted", nil
		}

		labels := map[string]string{"app.kubernetes.io/name": opts.name, "app.kubernetes.io/managed-by": fieldManager}
		spec := appsv1ac.DeploymentSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
				WithContainers(corev1ac.Container().WithName(opts.name).WithImage(opts.image))))
		replicas := int32(opts.replicas)
		if !opts.replicasGiven {
			// Without --replicas, a Deployment that exists keeps its count: left out of the apply,
			// the field this tool owned would be dropped and the Deployment fall back to one.
			switch live, err := deployments.Get(ctx, opts.name, metav1.GetOptions{}); {
			case err == nil && live.Spec.Replicas != nil:
				replicas = *live.Spec.Replicas
			case err != nil && !apierrors.IsNotFound(err):
				return "", err
			}
		}
		d := appsv1ac.Deployment(opts.name, opts.memberNamespace).WithLabels(labels).WithSpec(spec.WithReplicas(replicas))
		applied, err := deployments.Apply(ctx, d, metav1.ApplyOptions{FieldManager: fieldManager, Force: true, DryRun: dryRun})
		if err != nil {
			return "", err
		}
		if opts.dryRun {
			return fmt.Sprintf("would be applied, generation %d (server dry run)", applied.Generation), nil
		}
		if !opts.wait {
			return fmt.Sprintf("applied, generation %d", applied.Generation), nil
		}
		available, err := waitForRollout(ctx, deployments, opts.name, applied.Generation, replicas)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("applied, generation %d, rolled out (%d available)", applied.Generation, available), nil
	}
}

func parseFlags(args []string, stdout io.Writer) (*options, error) {
	opts := &options{registry: genericclioptions.NewConfigFlags(true)}
	var selector, dryRun string
	cmd := &cobra.Command{
		Use:           "fanout-deploy (--name NAME --image IMAGE | -f FILE...) [-l SELECTOR | --placement NAME] [flags]",
		Short:         "Apply a Deployment, or any manifests, to every member cluster the registry selects",
		Long:          longHelp,
		Example:       exampleHelp,
		Args:          cobra.ArbitraryArgs, // checked below, with the other flags
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(*cobra.Command, []string) error { return nil },
	}
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	fs := cmd.Flags()
	opts.registry.AddFlags(fs)
	addFlags(fs, opts, &selector, &dryRun)
	opts.trust.AddFlags(fs)
	version := fs.Bool("version", false, "print the version (the SDK release and the commit it was built from) and exit")
	if err := cmd.Execute(); err != nil {
		return nil, err
	}
	if help, _ := fs.GetBool("help"); help {
		return nil, pflag.ErrHelp
	}
	if *version {
		fmt.Fprintln(stdout, "fanout-deploy", buildinfo.Read())
		return nil, pflag.ErrHelp // done, as for --help
	}
	opts.replicasGiven = fs.Changed("replicas")
	if !opts.replicasGiven {
		opts.replicas = 1
	}
	return opts, errors.Join(opts.validate(fs, selector, dryRun)...)
}

// addFlags adds the command's own flags (kubectl's connection flags and the trust flags apart).
func addFlags(fs *pflag.FlagSet, opts *options, selector, dryRun *string) {
	fs.StringVarP(selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod,region!=eu")
	fs.StringVar(&opts.placement, "placement", "", "the members a placement chose: the PlacementDecisions of -n's namespace with this decision key, whoever wrote them")
	fs.StringArrayVarP(&opts.files, "filename", "f", nil, "apply the objects of this file or directory (YAML or JSON, several documents each) instead of one Deployment; repeatable")
	fs.StringVar(&opts.name, "name", "", "the Deployment's name (required without -f)")
	fs.StringVar(&opts.image, "image", "", "the container image (required without -f, unless --delete)")
	// No default in the flag: pflag would print "(default 1)" beside the usage's own words, and
	// an existing Deployment keeps its count without the flag (replicasGiven).
	fs.IntVar(&opts.replicas, "replicas", 0, "replicas on each member; without it, a new Deployment gets 1 and an existing one keeps its count")
	fs.StringVar(&opts.memberNamespace, "member-namespace", "default", "namespace of the Deployment on each member")
	fs.IntVar(&opts.concurrency, "concurrency", 0, "members at once (0: all)")
	fs.DurationVar(&opts.timeout, "timeout", 30*time.Second, "time allowed per member, retries included")
	fs.StringVar(dryRun, "dry-run", "none", `"server" asks each member to validate the change without making it; "none" makes it`)
	fs.Lookup("dry-run").NoOptDefVal = "server"
	fs.BoolVar(&opts.delete, "delete", false, "delete what would be applied instead: the Deployment, or every -f object in the reverse order (a kind a member does not serve is nothing to delete there)")
	fs.IntVar(&opts.canaries, "canary", 0, "run on this many members first, and on the rest only if all of those succeed (0: all at once)")
	fs.BoolVar(&opts.wait, "wait", false, "after applying, wait for each member's rollout to complete, within --timeout (as kubectl rollout status)")
	fs.BoolVar(&opts.skipNotReady, "skip-not-ready", false, "skip members whose Ready condition is False (they are listed, and do not fail the run)")
}

// validate checks the flags together, and reads -f's files: every problem, not the first.
func (o *options) validate(fs *pflag.FlagSet, selector, dryRun string) []error {
	var errs []error
	if args := fs.Args(); len(args) > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q: everything is given by flags", args[0]))
	}
	switch dryRun {
	case "server":
		o.dryRun = true
	case "none":
	default:
		errs = append(errs, fmt.Errorf("--dry-run=%s: want server or none (a change to other clusters cannot be checked client-side)", dryRun))
	}
	switch {
	case len(o.files) > 0:
		for _, flag := range []string{"name", "image", "replicas"} {
			if fs.Changed(flag) {
				errs = append(errs, fmt.Errorf("-f and --%s conflict: the files say what to apply", flag))
			}
		}
		if len(errs) == 0 {
			var err error
			if o.manifests, err = readManifests(o.files); err != nil {
				errs = append(errs, err)
			}
		}
	case o.name == "":
		errs = append(errs, errors.New("--name is required (or -f FILE)"))
	default:
		if msgs := validation.IsDNS1123Subdomain(o.name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--name %q is not a valid Deployment name: %s", o.name, strings.Join(msgs, "; ")))
		}
	}
	if len(o.files) == 0 && o.image == "" && !o.delete {
		errs = append(errs, errors.New("--image is required, unless --delete or -f"))
	}
	if msgs := validation.IsDNS1123Label(o.memberNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--member-namespace %q: %s", o.memberNamespace, strings.Join(msgs, "; ")))
	}
	if o.replicas < 0 || o.replicas > 1<<20 {
		errs = append(errs, fmt.Errorf("--replicas %d: want 0 to %d", o.replicas, 1<<20))
	}
	if o.canaries < 0 {
		errs = append(errs, fmt.Errorf("--canary %d: want 0 (none) or more", o.canaries))
	}
	if o.concurrency < 0 {
		errs = append(errs, fmt.Errorf("--concurrency %d: want 0 (all) or more", o.concurrency))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %v: want a positive duration", o.timeout))
	}
	if o.placement != "" && selector != "" {
		errs = append(errs, errors.New("--placement and --selector conflict: the placement's decision chose the members"))
	}
	var err error
	if o.selector, err = labels.Parse(selector); err != nil {
		errs = append(errs, fmt.Errorf("--selector: %w", err))
	}
	if _, err = o.trust.ResolverOptions(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

const longHelp = `Apply (or delete) a Deployment on every member cluster that the registry's Clusters in one
namespace (cluster set) select, all at once, and report what happened on each.

With -f, apply any objects instead: files and directories of YAML or JSON (several documents a
file; a directory's .yaml, .yml and .json files), each object with server-side apply, in order,
on every member. Each member maps each kind with its own API, so a kind one member does not serve
is that member's error, not everyone's. A namespaced object without a namespace goes to
--member-namespace. --dry-run=server, --wait (for Deployments, StatefulSets and DaemonSets) and
--delete (in the reverse order) work as they do for the one Deployment. --delete goes on past a
kind a member does not serve (there is nothing of it to delete), so it undoes an apply that
stopped at such a kind. A server dry run asks each member about each object on its own, as
kubectl apply --dry-run=server does: an object in a Namespace that the same files create fails
there, since a dry run makes no Namespace; dry-run the Namespace first, or apply it.

Without --replicas, a Deployment that exists keeps its replica count.

The registry is reached with kubectl's connection flags; each member with the credentials its
Cluster points to, read with your own permissions.`

const exampleHelp = `  # Two replicas of nginx on every production member of the "fleet" cluster set
  fanout-deploy -n fleet -l env=prod --name web --image nginx:1.27 --replicas 2

  # Check first: each member validates the change without making it
  fanout-deploy -n fleet --name web --image nginx:1.28 --dry-run=server

  # Any manifests: a directory's YAML files, each object applied with server-side apply on every
  # member, waiting for its Deployments, StatefulSets and DaemonSets to roll out
  fanout-deploy -n fleet -l env=prod -f ./app/ -f extra.yaml --wait

  # Remove them again, in the reverse order
  fanout-deploy -n fleet -l env=prod -f ./app/ -f extra.yaml --delete

  # The members a placement chose (its PlacementDecisions, whoever wrote them), in their order
  fanout-deploy -n fleet --placement web --name web --image nginx:1.27 --canary 1

  # Remove it again, from the registry of another kubeconfig context
  fanout-deploy --context ops -n fleet --name web --delete`

// waitForRollout waits until the Deployment's controller has rolled out generation: every
// replica updated and available, none of an older template left, as kubectl rollout status
// judges it. It returns how many replicas are available, or, when ctx ends first or the rollout
// exceeded its progress deadline, an error that says how far it got.
func waitForRollout(ctx context.Context, deployments appsv1client.DeploymentInterface, name string, generation int64, replicas int32) (int32, error) {
	if deadline, ok := ctx.Deadline(); ok {
		// Stop a little before the member's timeout, so that its result says how far the rollout
		// got, not only that the time ran out.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Until(deadline)/10))
		defer cancel()
	}
	var last appsv1.DeploymentStatus
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := deployments.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = d.Status
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
				return false, fmt.Errorf("rollout of generation %d exceeded its progress deadline: %s", generation, c.Message)
			}
		}
		return d.Status.ObservedGeneration >= generation && d.Status.UpdatedReplicas == replicas &&
			d.Status.Replicas == replicas && d.Status.AvailableReplicas == replicas, nil
	})
	if err != nil && ctx.Err() != nil {
		return 0, fmt.Errorf("rollout of generation %d not complete (observed generation %d; %d of %d replicas updated, %d available)",
			generation, last.ObservedGeneration, last.UpdatedReplicas, replicas, last.AvailableReplicas)
	}
	return last.AvailableReplicas, err
}
