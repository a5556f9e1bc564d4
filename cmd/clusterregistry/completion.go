package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shell completion that knows the registry: contexts of the kubeconfig, the registry's
// namespaces (cluster sets) and the Clusters of -n's. cobra's completion command writes the
// shell's script; kubectl completes the plugin form through kubectl_complete-clusterregistry,
// which this binary answers when it is installed under that name too.

// completionTimeout bounds a completion's request to the registry: a shell waits for it.
const completionTimeout = 5 * time.Second

// registerCompletions adds dynamic completion to root's connection flags and to the subcommands
// that take a context or a Cluster's name.
func registerCompletions(root *cobra.Command, f *factory) {
	_ = root.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return contextNames(f), cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("namespace", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return namespaceNames(f), cobra.ShellCompDirectiveNoFileComp
	})
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "join":
			cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return contextNames(f), cobra.ShellCompDirectiveNoFileComp
			}
		case "unjoin", "credential":
			cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return clusterNames(f, nil), cobra.ShellCompDirectiveNoFileComp
			}
		case "get", "describe":
			cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				return clusterNames(f, args), cobra.ShellCompDirectiveNoFileComp
			}
		}
		if cmd.Flags().Lookup("member-context") != nil {
			_ = cmd.RegisterFlagCompletionFunc("member-context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return contextNames(f), cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
}

func contextNames(f *factory) []string {
	raw, err := f.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil
	}
	return sortedKeys(raw.Contexts)
}

func namespaceNames(f *factory) []string {
	reg, err := f.Registry()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	list, err := reg.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var names []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	return names
}

// clusterNames are the Clusters of -n's namespace, less those already given.
func clusterNames(f *factory, given []string) []string {
	reg, err := f.Registry()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	list, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(reg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var names []string
	for _, c := range list.Items {
		if !slices.Contains(given, c.Name) {
			names = append(names, c.Name)
		}
	}
	return names
}

// asInvoked adapts the command to the name it was run by: as kubectl's plugin
// (kubectl-clusterregistry) its help says "kubectl clusterregistry"; as kubectl's plugin
// completion (kubectl_complete-clusterregistry) it answers cobra's __complete request.
func asInvoked(root *cobra.Command, name string, args []string) []string {
	switch name {
	case "kubectl-clusterregistry":
		displayAs(root, "kubectl clusterregistry")
	case "kubectl_complete-clusterregistry":
		displayAs(root, "kubectl clusterregistry")
		return append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	return args
}

func displayAs(root *cobra.Command, name string) {
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = name
	var rewrite func(*cobra.Command)
	rewrite = func(c *cobra.Command) {
		c.Example = strings.ReplaceAll(c.Example, "  clusterregistry ", "  "+name+" ")
		for _, sub := range c.Commands() {
			rewrite(sub)
		}
	}
	rewrite(root)
}

// placementNames are the Placements of -n's namespace.
func placementNames(f *factory) []string {
	reg, err := f.Registry()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	list, err := reg.Clusters.ClusterregistryV1alpha1().Placements(reg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(list.Items))
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// releaseNames are the Releases of -n's namespace.
func releaseNames(f *factory) []string {
	reg, err := f.Registry()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	list, err := reg.Clusters.ClusterregistryV1alpha1().Releases(reg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(list.Items))
	for _, r := range list.Items {
		names = append(names, r.Name)
	}
	return names
}
