package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// get's -o custom-columns and --sort-by, as kubectl's (k8s.io/kubectl/pkg/cmd/get), whose
// module this command does not import for two printers: JSONPaths are read as kubectl reads them
// ("{.status.version}", ".status.version" or "status.version"), over the object as JSON.

// customColumn is one HEADER:JSONPATH of -o custom-columns.
type customColumn struct {
	header string
	path   *jsonpath.JSONPath
}

// parseCustomColumns reads kubectl's spec: HEADER:JSONPATH, comma-separated.
func parseCustomColumns(spec string) ([]customColumn, error) {
	if spec == "" {
		return nil, errors.New("want HEADER:JSONPATH,..., e.g. NAME:.metadata.name,VERSION:.status.version")
	}
	var columns []customColumn
	for _, part := range splitColumns(spec) {
		header, expr, ok := strings.Cut(part, ":")
		if !ok || header == "" || expr == "" {
			return nil, fmt.Errorf("column %q: want HEADER:JSONPATH", part)
		}
		path, err := parseJSONPath(header, expr)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", header, err)
		}
		columns = append(columns, customColumn{header: header, path: path})
	}
	return columns, nil
}

// splitColumns splits spec at the commas that are not inside a JSONPath's brackets or braces
// (a filter such as [?(@.type=="Ready")] holds none, but a union [0,1] does).
func splitColumns(spec string) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range spec {
		switch r {
		case '[', '{', '(':
			depth++
		case ']', '}', ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, spec[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, spec[start:])
}

// parseJSONPath parses expr as kubectl's relaxed JSONPath: braces and the leading dot optional.
func parseJSONPath(name, expr string) (*jsonpath.JSONPath, error) {
	if !strings.HasPrefix(expr, "{") {
		expr = "{." + strings.TrimPrefix(expr, ".") + "}"
	}
	path := jsonpath.New(name).AllowMissingKeys(true)
	if err := path.Parse(expr); err != nil {
		return nil, err
	}
	return path, nil
}

// asJSON is obj, of kind, as its JSON reads, which is what JSONPaths name.
func asJSON[T any, P object[T]](kind string, obj *T) (map[string]any, error) {
	c := P(obj).DeepCopyObject()
	c.GetObjectKind().SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind(kind))
	return runtime.DefaultUnstructuredConverter.ToUnstructured(c)
}

// values is what path finds in obj, each printed as kubectl prints it; none when it finds nothing.
func values(path *jsonpath.JSONPath, obj map[string]any) ([]string, error) {
	results, err := path.FindResults(obj)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range results {
		for _, v := range r {
			if !v.IsValid() {
				continue
			}
			var b bytes.Buffer
			if err := path.PrintResults(&b, []reflect.Value{v}); err != nil {
				return nil, err
			}
			out = append(out, b.String())
		}
	}
	return out, nil
}

// customColumnsTable is items as a table of the columns, in their order; a path that finds
// nothing in an object is <none>, as kubectl shows it.
func customColumnsTable[T any, P object[T]](kind string, columns []customColumn, items []T) *metav1.Table {
	t := &metav1.Table{}
	for _, col := range columns {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: col.header, Type: "string"})
	}
	for i := range items {
		row := metav1.TableRow{Object: runtime.RawExtension{Object: P(&items[i])}}
		obj, err := asJSON[T, P](kind, &items[i])
		for _, col := range columns {
			cell := "<none>"
			if err == nil {
				if vs, ferr := values(col.path, obj); ferr == nil && len(vs) > 0 {
					cell = strings.Join(vs, ",")
				}
			}
			row.Cells = append(row.Cells, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// sortByJSONPath sorts items by the first value path finds in each, as kubectl's --sort-by:
// numbers by value, everything else (names, times in RFC 3339) as text; an object where the path
// finds nothing comes first. Ties keep the overview's order.
func sortByJSONPath[T any, P object[T]](kind string, items []T, path *jsonpath.JSONPath) error {
	keys := make([]string, len(items))
	for i := range items {
		obj, err := asJSON[T, P](kind, &items[i])
		if err != nil {
			return err
		}
		vs, err := values(path, obj)
		if err != nil {
			return err
		}
		if len(vs) > 0 {
			keys[i] = vs[0]
		}
	}
	type keyed struct {
		key  string
		item T
	}
	sorted := make([]keyed, len(items))
	for i := range items {
		sorted[i] = keyed{keys[i], items[i]}
	}
	byKey := func(a, b keyed) int {
		an, aerr := strconv.ParseFloat(a.key, 64)
		bn, berr := strconv.ParseFloat(b.key, 64)
		if aerr == nil && berr == nil {
			return cmp.Compare(an, bn)
		}
		return strings.Compare(a.key, b.key)
	}
	slices.SortStableFunc(sorted, byKey)
	for i := range sorted {
		items[i] = sorted[i].item
	}
	return nil
}
