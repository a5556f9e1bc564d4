package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clientset/versioned/scheme"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// writeObject writes v as -o asks: "json" (indented, as kubectl writes it) or "yaml".
func writeObject(w io.Writer, v any, output string) error {
	var data []byte
	var err error
	if output == "json" {
		data, err = json.MarshalIndent(v, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// appliedOutput is -o for the commands that apply Clusters (join, import): as with kubectl apply
// -o, the applied objects go to standard output, as the registry returned them, in any of
// kubectl's formats (cli-runtime's PrintFlags), and the report lines go to standard error instead.
type appliedOutput struct {
	flags   *genericclioptions.PrintFlags
	printer printers.ResourcePrinter
}

func (o *appliedOutput) addFlag(cmd *cobra.Command) {
	o.flags = genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme)
	o.flags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "print the applied Clusters, as kubectl apply -o does (the report then goes to stderr): " +
		strings.Join(o.flags.AllowedFormats(), ", ")
}

func (o *appliedOutput) format() string { return *o.flags.OutputFormat }

func (o *appliedOutput) validate() error {
	if o.format() == "" {
		return nil
	}
	var err error
	if o.printer, err = o.flags.ToPrinter(); err != nil {
		return usageError{fmt.Errorf("--output=%s: want one of %s", o.format(), strings.Join(o.flags.AllowedFormats(), ", "))}
	}
	return nil
}

// report is where the report lines go: stderr when the objects are printed.
func (o *appliedOutput) report(cmd *cobra.Command) io.Writer {
	if o.format() != "" {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

// print writes the applied Clusters to w, as printItems does.
func (o *appliedOutput) print(w io.Writer, applied []*v1alpha1.Cluster) error {
	if o.printer == nil {
		return nil
	}
	clusters := make([]v1alpha1.Cluster, len(applied))
	for i, c := range applied {
		clusters[i] = *c.DeepCopy()
	}
	return printItems(w, o.printer, o.format(), "Cluster", clusters, len(clusters) == 1)
}

// printItems prints objects of kind as kubectl get does: as the objects read in JSON (which is
// what JSONPaths and custom columns name), without managed fields, one as itself (single) and
// several as a List, or a name a line.
func printItems[T any, P object[T]](w io.Writer, printer printers.ResourcePrinter, format, kind string, items []T, single bool) error {
	objs, err := asUnstructured[T, P](kind, items)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		obj.(*unstructured.Unstructured).SetManagedFields(nil)
	}
	return printObjects(w, printer, format, objs, single)
}

// asUnstructured is items, of kind, as kubectl reads objects from the server: unstructured,
// with their kind set (a List's items carry none).
func asUnstructured[T any, P object[T]](kind string, items []T) ([]runtime.Object, error) {
	objs := make([]runtime.Object, len(items))
	for i := range items {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(P(&items[i]))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, P(&items[i]).GetName(), err)
		}
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind(kind))
		objs[i] = u
	}
	return objs, nil
}

// printObjects prints objs with one of -o's object printers: one object alone when single, a
// line each for -o name, else one List.
func printObjects(w io.Writer, printer printers.ResourcePrinter, format string, objs []runtime.Object, single bool) error {
	if single && len(objs) == 1 {
		return printer.PrintObj(objs[0], w)
	}
	if format == "name" {
		for _, obj := range objs {
			if err := printer.PrintObj(obj, w); err != nil {
				return err
			}
		}
		return nil
	}
	list := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, obj := range objs {
		list.Items = append(list.Items, runtime.RawExtension{Object: obj})
	}
	return printer.PrintObj(list, w)
}
