package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// get -w prints the list, then a row per change, each row a table of its own: the rows keep the
// first table's columns (each column started where its own cells did, under nothing).
func TestWatchRowsLineUpWithTheHeader(t *testing.T) {
	columns := []metav1.TableColumnDefinition{{Name: "Name", Type: "string"}, {Name: "Ready", Type: "string"},
		{Name: "Last Report", Type: "string"}, {Name: "Message", Type: "string"}}
	row := func(name, ready, report, message string) *metav1.Table {
		c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return &metav1.Table{ColumnDefinitions: columns, Rows: []metav1.TableRow{{Cells: []any{name, ready, report, message}, Object: runtime.RawExtension{Object: c}}}}
	}
	var out bytes.Buffer
	aligned := &alignedRows{out: &out}
	printer := printers.NewTablePrinter(printers.PrintOptions{})
	require.NoError(t, printer.PrintObj(row("prod-eu-west-1", "True", "5s ago", "fine"), aligned))
	require.NoError(t, printer.PrintObj(row("b", "False", "1m ago", "dial tcp: connection refused"), aligned))
	require.NoError(t, printer.PrintObj(row("a-much-longer-name-than-any", "Unknown", "never", "-"), aligned))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 4, out.String())
	t.Log("\n" + out.String())
	header := lines[0]
	ready, report, message := strings.Index(header, "READY"), strings.Index(header, "LAST REPORT"), strings.Index(header, "MESSAGE")
	for _, line := range lines[1:3] {
		require.Equal(t, ready, strings.Index(line, strings.Fields(line)[1]), "READY: %q", line)
		require.Contains(t, []int{report}, strings.Index(line, strings.Fields(line)[2]), "LAST REPORT: %q", line)
	}
	require.Equal(t, message, strings.Index(lines[2], "dial tcp"), "%q", lines[2])
	// A name wider than its column pushes the rest of its row, three spaces on.
	require.True(t, strings.HasPrefix(lines[3], "a-much-longer-name-than-any   Unknown"), "%q", lines[3])

	// What it cannot split into the same cells passes as it is.
	out.Reset()
	_, err := aligned.Write([]byte("one   two\n"))
	require.NoError(t, err)
	require.Equal(t, "one   two\n", out.String())
}
