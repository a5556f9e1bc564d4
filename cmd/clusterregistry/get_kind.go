package main

import (
	"cmp"
	"context"
	"slices"
	"strings"

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

// getKind is what get needs of a kind to list, watch and print it as kubectl get does: get,
// get placements and get releases are the same command over three of these, each made by
// registryKind.
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

// namespacedClient is what get reads of a kind's generated client in one namespace.
type namespacedClient[P, L any] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (P, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// listObject is a generated List of a kind, which says the resourceVersion it was read at.
type listObject interface {
	runtime.Object
	GetResourceVersion() string
}

// registryKind is the getKind of a kind of the registry, read through client (the generated
// client's namespace method, such as Clusters) with items the List's items; the caller adds
// its table and order.
func registryKind[T any, P object[T], L listObject, C namespacedClient[P, L]](kind, plural string, client func(namespace string) C, items func(L) []T) getKind[T, P] {
	return getKind[T, P]{
		kind: kind, plural: plural,
		list: func(ctx context.Context, ns string, opts metav1.ListOptions) ([]T, string, error) {
			list, err := client(ns).List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			return items(list), list.GetResourceVersion(), nil
		},
		get: func(ctx context.Context, ns, name string) (*T, error) {
			obj, err := client(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return (*T)(obj), nil
		},
		watch: func(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
			return client(ns).Watch(ctx, opts)
		},
	}
}

// byNamespacedName sorts items by namespace, then name: the overview's order of the kinds
// without one of their own.
func byNamespacedName[T any, P object[T]](items []T) {
	slices.SortFunc(items, func(a, b T) int {
		return cmp.Or(strings.Compare(P(&a).GetNamespace(), P(&b).GetNamespace()), strings.Compare(P(&a).GetName(), P(&b).GetName()))
	})
}
