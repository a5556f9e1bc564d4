package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// DescribeOptions are describe's arguments: Complete takes them, Run prints.
type DescribeOptions struct {
	names   []string
	factory *factory
	out     io.Writer
}

var (
	describeLong = `describe shows one or more Clusters of the -n namespace as a person reads them, as kubectl
describe does: where the member is, which credentials a reader would follow (pointers only), what
the health controller last reported, each condition with its reason and message, and the Events
written about the Cluster, newest last.`

	describeExample = `  clusterregistry describe prod-eu-1 -n fleet`
)

func newDescribe(f *factory) *cobra.Command {
	o := &DescribeOptions{}
	return &cobra.Command{
		Use:     "describe NAME ...",
		Short:   "Show a Cluster in full: endpoints, providers, status, conditions and recent events",
		Long:    describeLong,
		Example: describeExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("give the name of a Cluster to describe")}
			}
			return nil
		},
		RunE: runOptions(f, o),
	}
}

// Complete takes the names.
func (o *DescribeOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.names, o.factory, o.out = args, f, cmd.OutOrStdout()
	return nil
}

// Validate has nothing to check that Args did not.
func (o *DescribeOptions) Validate() error { return nil }

// Run prints each Cluster, separated by a blank line.
func (o *DescribeOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	for i, name := range o.names {
		c, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(reg.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("cluster %s/%s: %w", reg.Namespace, name, err)
		}
		events, err := reg.Kube.CoreV1().Events(reg.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": c.Name, "involvedObject.kind": "Cluster", "involvedObject.uid": string(c.UID)}.String()})
		if err != nil {
			events = nil // describe what can be read; the events' absence says so below
		}
		if i > 0 {
			fmt.Fprintln(o.out)
		}
		if err := describeCluster(o.out, c, events, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

func describeCluster(out io.Writer, c *v1alpha1.Cluster, events *corev1.EventList, now time.Time) error {
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
	section("Endpoints:")
	for _, ep := range c.Spec.KubernetesAPIEndpoints.ServerEndpoints {
		line("  %s\tfrom %s", ep.ServerAddress, ep.ClientCIDR)
	}
	section("Auth Providers:")
	for _, p := range c.Spec.AuthInfo.Providers {
		line("  %s\t%s\t%s", p.Name, p.Type.Name, orDash(mapString(p.Config)))
	}
	section("Status:")
	line("  Version:\t%s", orDash(c.Status.Version))
	line("  Cluster ID:\t%s", orDash(c.Status.ClusterID))
	report := "never"
	if t := c.Status.LastProbeTime; t != nil {
		report = t.UTC().Format(time.RFC3339) + " (" + duration.HumanDuration(now.Sub(t.Time)) + " ago)"
	}
	line("  Last Report:\t%s", report)
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
