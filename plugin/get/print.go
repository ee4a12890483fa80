package get

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
)

// entry is one row of the output: a row of one cluster's table.
type entry struct {
	cluster  string
	resource int // index into Options.resources
	table    *resourceTable
	row      tableRow
	sortKey  any
}

// print reports warnings and failed clusters on stderr, prints the rows of the others
// and returns the error that sets the exit code.
func (o *Options) print(results []*clusterResult) error {
	failed := false
	searched := 0
	known := make([]bool, len(o.resources))
	var entries []entry
	for _, r := range results {
		for _, w := range r.warnings {
			fmt.Fprintf(o.ErrOut, "warning: %s\n", w)
		}
		if r.err != nil {
			failed = true
			fmt.Fprintf(o.ErrOut, "error: cluster %s: %v\n", r.cluster, r.err)
			continue
		}
		if r.skip {
			continue
		}
		searched++
		for i, t := range r.tables {
			if t == nil {
				continue
			}
			known[i] = true
			for _, row := range t.rows {
				entries = append(entries, entry{cluster: r.cluster, resource: i, table: t, row: row})
			}
		}
	}
	if searched == 0 && !failed {
		if len(o.Clusters) > 0 {
			return fmt.Errorf("no context reaches the clusters %s", strings.Join(o.Clusters, ","))
		}
		return fmt.Errorf("no context of the kubeconfig reaches a cluster with the registry installed; name contexts with --contexts")
	}
	if searched > 0 {
		for i, ok := range known {
			if !ok {
				return fmt.Errorf("the server doesn't have a resource type %q", o.resources[i])
			}
		}
	}

	o.sortEntries(entries)
	if o.Limit > 0 && int64(len(entries)) > o.Limit {
		entries = entries[:o.Limit]
	}

	var err error
	switch {
	case searched == 0:
	case o.printer != nil:
		err = o.printObjects(entries)
	case len(entries) == 0:
		o.printNoResources(results)
	default:
		err = o.printTables(entries)
	}
	if err != nil {
		return err
	}
	if len(o.names) > 0 && len(entries) == 0 && searched > 0 {
		return fmt.Errorf("%s %q not found in any cluster", o.resources[0], o.names[0])
	}
	if failed {
		return &cmdutil.ExitError{Code: cmdutil.ExitCodeError}
	}
	return nil
}

// sortEntries orders the entries by resource, then by --sort-by, then by cluster, then
// as each server returned them.
func (o *Options) sortEntries(entries []entry) {
	if o.sortPath != nil {
		for i := range entries {
			entries[i].sortKey = o.sortValue(entries[i].row.obj)
		}
	}
	slices.SortStableFunc(entries, func(a, b entry) int {
		if c := a.resource - b.resource; c != 0 {
			return c
		}
		if o.sortPath != nil {
			if c := compareValues(a.sortKey, b.sortKey); c != 0 {
				return c
			}
		}
		return strings.Compare(a.cluster, b.cluster)
	})
}

func (o *Options) sortValue(obj *unstructured.Unstructured) any {
	results, err := o.sortPath.FindResults(obj.Object)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil
	}
	v := results[0][0]
	if !v.IsValid() || !v.CanInterface() {
		return nil
	}
	return v.Interface()
}

// compareValues orders sort keys: missing first, numbers by value, the rest as strings
// (RFC 3339 timestamps sort in time order that way).
func compareValues(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	fa, aNum := number(a)
	fb, bNum := number(b)
	if aNum && bNum {
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// printObjects prints a v1 List of the objects, each annotated with its cluster.
func (o *Options) printObjects(entries []entry) error {
	list := &unstructured.UnstructuredList{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"metadata":   map[string]any{"resourceVersion": ""},
	}}
	for _, e := range entries {
		obj := e.row.obj.DeepCopy()
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[ClusterAnnotation] = e.cluster
		obj.SetAnnotations(annotations)
		list.Items = append(list.Items, *obj)
	}
	return o.printer.PrintObj(list, o.Out)
}

func (o *Options) printNoResources(results []*clusterResult) {
	if o.AllNamespaces {
		fmt.Fprintln(o.ErrOut, "No resources found")
		return
	}
	// Like kubectl, name the namespace only when a namespaced kind was listed: a
	// cluster-scoped one (Clusters, ResourceSyncRules) has none.
	namespaces := map[string]bool{}
	for i, r := range results {
		if r.err == nil && !r.skip && listsNamespaced(r) {
			namespaces[o.targets[i].namespace] = true
		}
	}
	if len(namespaces) == 1 {
		for ns := range namespaces {
			fmt.Fprintf(o.ErrOut, "No resources found in %s namespace.\n", ns)
		}
		return
	}
	fmt.Fprintln(o.ErrOut, "No resources found")
}

// listsNamespaced reports whether r listed a namespaced kind.
func listsNamespaced(r *clusterResult) bool {
	for _, t := range r.tables {
		if t != nil && t.mapping != nil && t.mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			return true
		}
	}
	return false
}

// printTables prints one table per resource type, like kubectl get does for several
// kinds: CLUSTER first, NAMESPACE second with -A, then the server's columns.
func (o *Options) printTables(entries []entry) error {
	withKind := len(o.resources) > 1
	first := true
	for start := 0; start < len(entries); {
		end := start
		for end < len(entries) && entries[end].resource == entries[start].resource {
			end++
		}
		block := entries[start:end]
		start = end
		columns := mergeColumns(block, o.wide)
		if !first {
			// kubectl separates the tables of several kinds with an empty line.
			fmt.Fprintln(o.Out)
		}
		first = false
		// A writer per table: the printers' tab writer remembers column widths.
		w := printers.GetNewTabWriter(o.Out)
		if !o.NoHeaders {
			header := []string{"CLUSTER"}
			if o.AllNamespaces {
				header = append(header, "NAMESPACE")
			}
			for _, c := range columns {
				header = append(header, strings.ToUpper(c.Name))
			}
			writeLine(w, header)
		}
		for _, e := range block {
			line := []string{e.cluster}
			if o.AllNamespaces {
				line = append(line, e.row.obj.GetNamespace())
			}
			for _, c := range columns {
				line = append(line, o.cell(e, c.Name, withKind))
			}
			writeLine(w, line)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func writeLine(w io.Writer, cells []string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// mergeColumns returns the columns to print for one resource type: those of the
// first cluster, then any other cluster's that the first lacks (servers of other
// versions may print other columns). Columns of priority > 0 only when wide.
func mergeColumns(block []entry, wide bool) []metav1.TableColumnDefinition {
	var out []metav1.TableColumnDefinition
	seenTables := map[*resourceTable]bool{}
	seen := map[string]bool{}
	for _, e := range block {
		if seenTables[e.table] {
			continue
		}
		seenTables[e.table] = true
		for _, c := range e.table.columns {
			if seen[c.Name] || (c.Priority > 0 && !wide) {
				continue
			}
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	return out
}

// cell formats the cell of column name in e's row; the name column gets "kind.group/"
// in front when several kinds are printed.
func (o *Options) cell(e entry, name string, withKind bool) string {
	idx := -1
	for i, c := range e.table.columns {
		if c.Name == name {
			idx = i
			break
		}
	}
	if idx < 0 || idx >= len(e.row.cells) {
		return "<none>"
	}
	s := formatCell(e.row.cells[idx])
	if withKind && e.table.columns[idx].Format == "name" {
		s = kindPrefix(e.table.mapping) + s
	}
	return s
}

func kindPrefix(m *meta.RESTMapping) string {
	gk := m.GroupVersionKind.GroupKind()
	kind := strings.ToLower(gk.Kind)
	if gk.Group != "" {
		kind += "." + gk.Group
	}
	return kind + "/"
}

func formatCell(v any) string {
	switch c := v.(type) {
	case nil:
		return "<none>"
	case string:
		// One line per row: a cell never breaks the table.
		return strings.NewReplacer("\n", "\\n", "\t", " ").Replace(c)
	default:
		return fmt.Sprint(c)
	}
}
