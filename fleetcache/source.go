package fleetcache

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// listWatch lists and watches through a client's List and Watch.
func listWatch[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error), watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := list(ctx, opts)
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		WatchFuncWithContext: watchFn,
	}
}

// selected lists and watches through lw only the objects that selector matches.
func selected(plain cache.ListerWatcher, selector string) cache.ListerWatcher {
	lw := cache.ToListerWatcherWithContext(plain)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			return lw.ListWithContext(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return lw.WatchWithContext(ctx, opts)
		},
	}
}

// typedListWatch lists and watches a resource of rc's group-version in every namespace, as
// client-go's generated clientset does, decoding into client-go's types.
func typedListWatch(rc rest.Interface, resource string) cache.ListerWatcher {
	return listWatch(
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			var timeout time.Duration
			if opts.TimeoutSeconds != nil {
				timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
			}
			return rc.Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout).Do(ctx).Get()
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			var timeout time.Duration
			if opts.TimeoutSeconds != nil {
				timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
			}
			opts.Watch = true
			return rc.Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout).Watch(ctx)
		})
}

// typedCodecs decode client-go's types; built once, as each build allocates.
var typedCodecs = scheme.Codecs.WithoutConversion()

// typedRESTClient is a REST client of one built-in group-version, on the member's config and
// HTTP client, asking for protobuf where the member serves it.
func typedRESTClient(config *rest.Config, httpClient *http.Client, gv schema.GroupVersion) (rest.Interface, error) {
	c := rest.CopyConfig(config)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = typedCodecs
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientForConfigAndClient(c, httpClient)
}

// typedExample is a new T, checked against client-go's scheme: T must be the type of gvr's
// objects there.
func typedExample[T runtime.Object](gvr schema.GroupVersionResource) (runtime.Object, error) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("fleetcache: %s: Typed needs a pointer to a client-go type, not %s", gvr.Resource, t)
	}
	example, ok := reflect.New(t.Elem()).Interface().(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("fleetcache: %s: %s is not a runtime.Object", gvr.Resource, t)
	}
	kinds, _, err := scheme.Scheme.ObjectKinds(example)
	if err != nil {
		return nil, fmt.Errorf("fleetcache: %s: %s is not one of client-go's types: %w", gvr.Resource, t, err)
	}
	for _, gvk := range kinds {
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		if gvk.GroupVersion() == gvr.GroupVersion() && (plural == gvr || singular == gvr) {
			return example, nil
		}
	}
	return nil, fmt.Errorf("fleetcache: %s (%s) does not hold %s (kind %s): give Typed the type of the resource's objects", gvr.Resource, gvr.GroupVersion(), t, kinds[0].Kind)
}
