package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// DescribeOptions are describe's arguments and flags: Complete takes them, Run prints.
type DescribeOptions struct {
	AllNamespaces bool
	Selector      string

	names    []string
	selector labels.Selector
	factory  *factory
	out      io.Writer
}

var (
	describeLong = `describe shows Clusters as a person reads them, as kubectl describe does: where the member is,
which credentials a reader would follow (pointers only) and when they expire, what the health
controller last reported, each condition with its reason and message, and the Events written
about the Cluster, newest last.

As kubectl describe: the named Clusters of the -n namespace, or with no name every Cluster there
(-l selects by label, -A in every namespace). describe release NAME shows a Release instead
(see describe release --help).`

	describeExample = `  # One member
  clusterregistry describe prod-eu-1 -n fleet

  # Every production member of every cluster set
  clusterregistry describe -A -l env=prod`
)

func newDescribe(f *factory) *cobra.Command {
	o := &DescribeOptions{}
	cmd := &cobra.Command{
		Use:     "describe [NAME ...] [-n NAMESPACE | -A] [-l SELECTOR]",
		Short:   "Show Clusters in full: endpoints, providers and credential expiry, status, conditions, recent events",
		Long:    describeLong,
		Example: describeExample,
		Args:    cobra.ArbitraryArgs,
		RunE:    runOptions(f, o),
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "every namespace (cluster set)")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod")
	cmd.AddCommand(newDescribeRelease(f))
	return cmd
}

// Complete takes the names and the selector.
func (o *DescribeOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.names, o.factory, o.out = args, f, cmd.OutOrStdout()
	var err error
	if o.selector, err = labels.Parse(o.Selector); err != nil {
		return usageError{fmt.Errorf("-l/--selector: %w", err)}
	}
	return nil
}

// Validate refuses names with -A or -l, as get does.
func (o *DescribeOptions) Validate() error {
	switch {
	case len(o.names) > 0 && o.AllNamespaces:
		return usageError{errors.New("names and -A conflict: a name is looked up in one namespace, -n's")}
	case len(o.names) > 0 && !o.selector.Empty():
		return usageError{errors.New("names and -l conflict: give one or the other")}
	}
	return nil
}

// Run prints each Cluster, separated by a blank line.
func (o *DescribeOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	namespace := reg.Namespace
	if o.AllNamespaces {
		namespace = metav1.NamespaceAll
	}
	clusters := reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace)
	var selected []v1alpha1.Cluster
	if len(o.names) == 0 {
		list, err := clusters.List(ctx, metav1.ListOptions{LabelSelector: o.selector.String()})
		if err != nil {
			return fmt.Errorf("listing the Clusters of %s: %w", describeNamespace(namespace), err)
		}
		if len(list.Items) == 0 {
			if namespace != metav1.NamespaceAll {
				if err := reg.ClusterSetExists(ctx, namespace); err != nil {
					return err
				}
			}
			fmt.Fprintf(o.out, "No Clusters found in %s.\n", describeNamespace(namespace))
			return nil
		}
		selected = list.Items
		slices.SortFunc(selected, func(a, b v1alpha1.Cluster) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
	}
	for _, name := range o.names {
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("cluster %s/%s: %w", namespace, name, err)
		}
		selected = append(selected, *c)
	}
	expiries := newTokenExpiries(reg.Kube)
	for i := range selected {
		c := &selected[i]
		events, err := reg.Kube.CoreV1().Events(c.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": c.Name, "involvedObject.kind": "Cluster", "involvedObject.uid": string(c.UID)}.String()})
		if err != nil {
			events = nil // describe what can be read; the events' absence says so below
		}
		if i > 0 {
			fmt.Fprintln(o.out)
		}
		now := time.Now()
		tokens := map[string]time.Time{}
		for _, p := range c.Spec.AuthInfo.Providers {
			if exp, ok := expiries.of(ctx, c, p); ok {
				tokens[p.Name] = exp
			}
		}
		if err := describeCluster(o.out, c, tokens, events, now); err != nil {
			return err
		}
	}
	return nil
}

// describeCluster writes c; tokens are, by provider name, when the tokens the caller could read
// expire.
func describeCluster(out io.Writer, c *v1alpha1.Cluster, tokens map[string]time.Time, events *corev1.EventList, now time.Time) error {
	// text/tabwriter, not kubectl's, which remembers column widths across flushes.
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	line := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	// Each section aligns its own columns.
	section := func(heading string) {
		_ = w.Flush()
		line("%s", heading)
	}
	line("Name:\t%s", c.Name)
	line("Namespace:\t%s", c.Namespace)
	line("Display Name:\t%s", orDash(c.Spec.DisplayName))
	line("Labels:\t%s", orDash(mapString(c.Labels)))
	line("Created:\t%s (%s ago)", c.CreationTimestamp.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(c.CreationTimestamp.Time)))
	ca := "none (the system's roots, unless the credential brings its own)"
	if n := strings.Count(string(c.Spec.KubernetesAPIEndpoints.CABundle), "BEGIN CERTIFICATE"); n > 0 {
		ca = fmt.Sprintf("%d certificate(s)", n)
	}
	line("CA Bundle:\t%s", ca)
	reached := "directly, at its endpoints"
	if t := c.Spec.KubernetesAPIEndpoints.Tunnel; t != nil {
		reached = fmt.Sprintf("through a tunnel, whose agent authenticates as ServiceAccount %s/%s; the endpoints are as the member's own network sees them", c.Namespace, t.Agent)
	}
	line("Reached:\t%s", reached)
	section("Endpoints:")
	for _, ep := range c.Spec.KubernetesAPIEndpoints.ServerEndpoints {
		line("  %s\tfrom %s", ep.ServerAddress, ep.ClientCIDR)
	}
	section("Auth Providers:")
	for _, p := range c.Spec.AuthInfo.Providers {
		row := fmt.Sprintf("  %s\t%s\t%s", p.Name, p.Type.Name, orDash(mapString(p.Config)))
		if exp, ok := tokens[p.Name]; ok {
			row += "\ttoken expires " + exp.UTC().Format(time.RFC3339) + " (" + relative(exp, now) + ")"
		}
		line("%s", row)
	}
	section("Status:")
	line("  Version:\t%s", orDash(c.Status.Version))
	line("  Cluster ID:\t%s", orDash(c.Status.ClusterID))
	report := "never"
	if t := c.Status.LastProbeTime; t != nil {
		report = t.UTC().Format(time.RFC3339) + " (" + duration.HumanDuration(now.Sub(t.Time)) + " ago)"
	}
	line("  Last Report:\t%s", report)
	expire := "not known (the health controller writes it for credentials that say)"
	if t := c.Status.CredentialsExpireAt; t != nil {
		expire = t.UTC().Format(time.RFC3339) + " (" + relative(t.Time, now) + "), as the health controller last read them"
	}
	line("  Credentials Expire:\t%s", expire)
	section("Resources:")
	describeResources(line, c, now)
	section("Conditions:")
	if len(c.Status.Conditions) == 0 {
		line("  none: no health controller has reported on it (clusterregistry health -n %s)", c.Namespace)
	}
	for _, cond := range c.Status.Conditions {
		line("  %s\t%s\t%s\tsince %s\t%s", cond.Type, cond.Status, cond.Reason,
			duration.HumanDuration(now.Sub(cond.LastTransitionTime.Time))+" ago", strings.ReplaceAll(cond.Message, "\n", " "))
	}
	section("Events:")
	switch {
	case events == nil:
		line("  (not readable with your credentials)")
	case len(events.Items) == 0:
		line("  none")
	default:
		items := slices.Clone(events.Items)
		slices.SortFunc(items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
		for _, e := range items {
			line("  %s\t%s\t%s ago\t%s", e.Type, e.Reason, duration.HumanDuration(now.Sub(eventTime(e))), strings.ReplaceAll(e.Message, "\n", " "))
		}
	}
	return w.Flush()
}

// describeResources writes what c's status.resources say its Nodes hold and its Pods request,
// each resource as requested of allocatable, with the most of it free on one Node.
func describeResources(line func(string, ...any), c *v1alpha1.Cluster, now time.Time) {
	r := c.Status.Resources
	if r == nil {
		line("  not observed: no capacity controller has reported on it (clusterregistry controllers --controllers capacity)")
		return
	}
	line("  Nodes:\t%d, %d ready and schedulable", r.Nodes, r.ReadyNodes)
	for _, name := range slices.Sorted(maps.Keys(r.Allocatable)) {
		req, alloc, free := r.Requested[name], r.Allocatable[name], r.LargestFree[name]
		line("  %s:\t%s requested of %s\t%s free on one Node", name, req.String(), alloc.String(), free.String())
	}
	line("  Observed:\t%s (%s ago)", r.LastObservedTime.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(r.LastObservedTime.Time)))
}

// eventTime is when an Event last happened, whichever of its times the writer set.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// mapString is a map as k=v, sorted, comma-separated.
func mapString(m map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}
