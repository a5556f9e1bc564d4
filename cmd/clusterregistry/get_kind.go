package main

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// object is a kind of the registry that get shows, as its generated client returns it.
type object[T any] interface {
	*T
	runtime.Object
	metav1.Object
}

// getKind is what get needs of a kind to list, watch and print it as kubectl get does: get
// Clusters and get placements are the same command over two of these.
type getKind[T any, P object[T]] struct {
	// kind and plural name it in messages ("Cluster", "Clusters").
	kind, plural string
	list         func(ctx context.Context, namespace string, opts metav1.ListOptions) (items []T, resourceVersion string, err error)
	get          func(ctx context.Context, namespace, name string) (*T, error)
	watch        func(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	// table is the overview of items, in their order, with each row's object set (the printer
	// reads namespaces and labels from it); wide says whether -o wide asked for the priority-1
	// columns, which some kinds read more to fill.
	table func(ctx context.Context, items []T, wide bool) *metav1.Table
	// order is the overview's order, where --sort-by does not say.
	order func(items []T)
}
