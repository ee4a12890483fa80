package status

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo"
)

// printView prints the two tables of one view: the clusters, then the rules. wide adds
// the key and credential states of each cluster: the reasons of its ReaderKeyReady,
// ReaderCredentialReady and RelaysAgree conditions.
func printView(out io.Writer, v View, now time.Time, wide bool) error {
	w := printers.GetNewTabWriter(out)
	header := "NAME\tID\tTYPE\tSTATE\tREADY\tSYNCED\tVERSION\tPROVIDER\tLAST HEARTBEAT\tMESSAGE"
	if wide {
		header += "\tKEY\tCREDENTIAL\tRELAYS"
	}
	fmt.Fprintln(w, header)
	for _, c := range v.Clusters {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s",
			c.Name, orNone(c.ID), typeCell(c), orNone(c.State), c.Ready, c.Synced,
			orNone(c.Version), orNone(c.Provider), age(c.LastHeartbeatTime, now), orNone(addressNote(c)))
		if wide {
			fmt.Fprintf(w, "\t%s\t%s\t%s", condCell(c.ReaderKey), condCell(c.ReaderCredential), condCell(c.Relays))
		}
		fmt.Fprintln(w)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, warning := range skewWarnings(v.Clusters) {
		fmt.Fprintf(out, "Warning: %s\n", warning)
	}
	fmt.Fprintln(out)
	if len(v.Rules) == 0 {
		_, err := fmt.Fprintln(out, "No ResourceSyncRules.")
		return err
	}
	w = printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "NAME\tKIND\tREADY\tSOURCES\tSYNCED\tCONFLICTS\tMESSAGE")
	for _, r := range v.Rules {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n",
			r.Name, kindShort(r.Group, r.Version, r.Kind), r.Ready, sources(r), r.SyncedObjects, r.Conflicts,
			orNone(truncate(r.Message, maxMessage)))
	}
	return w.Flush()
}

// Cells of the side-by-side table.
const (
	cellUnknownCluster = "-" // the context does not know the cluster
	cellUnreachable    = "?" // the context could not be read
)

// compareRow is one row of the side-by-side table.
type compareRow struct {
	name     string
	cells    []string // one per context
	disagree bool
}

// compare lines up the views of several contexts: per cluster name (sorted), its state
// as each context sees it. A context that could not be read (failed[i]) shows "?" and
// takes no part in the comparison; a row disagrees when the readable contexts do not all
// know the cluster or do not all report the same state.
func compare(views []View, failed []bool) []compareRow {
	names := map[string]bool{}
	states := make([]map[string]string, len(views))
	for i, v := range views {
		states[i] = map[string]string{}
		for _, c := range v.Clusters {
			names[c.Name] = true
			states[i][c.Name] = orNone(c.State)
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	rows := make([]compareRow, 0, len(sorted))
	for _, n := range sorted {
		row := compareRow{name: n}
		first := ""
		for i := range views {
			cell := cellUnreachable
			if !failed[i] {
				cell = cellUnknownCluster
				if s, ok := states[i][n]; ok {
					cell = s
				}
				if first == "" {
					first = cell
				} else if cell != first {
					row.disagree = true
				}
			}
			row.cells = append(row.cells, cell)
		}
		rows = append(rows, row)
	}
	return rows
}

// printCompare prints the side-by-side table: NAME, one column per context (its name in
// upper case), DISAGREE.
func printCompare(out io.Writer, contexts []string, rows []compareRow) error {
	w := printers.GetNewTabWriter(out)
	header := []string{"NAME"}
	for _, c := range contexts {
		header = append(header, strings.ToUpper(c))
	}
	header = append(header, "DISAGREE")
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		disagree := "no"
		if r.disagree {
			disagree = "yes"
		}
		fmt.Fprintln(w, r.name+"\t"+strings.Join(r.cells, "\t")+"\t"+disagree)
	}
	return w.Flush()
}

// addressNote is the message of a Cluster (truncated), with where it is reached when that
// is not the address it advertises (join --server chose another).
func addressNote(c ClusterInfo) string {
	msg := truncate(c.Message, maxMessage)
	if c.ReachedAt == "" || c.Advertised == "" || c.ReachedAt == c.Advertised {
		return msg
	}
	note := fmt.Sprintf("reached at %s (advertises %s)", c.ReachedAt, c.Advertised)
	if msg == "" {
		return note
	}
	return msg + "; " + note
}

// skewWarnings says which clusters run controllers further apart than the supported
// version skew (buildinfo.Skew) from the local one, or from each other when no local
// Cluster reports a version.
func skewWarnings(clusters []ClusterInfo) []string {
	ref := ClusterInfo{}
	for _, c := range clusters {
		if c.Type == string(v1alpha1.ClusterTypeLocal) && c.ControllerVersion != "" {
			ref = c
		}
	}
	var out []string
	for _, c := range clusters {
		if ref.Name == "" && c.ControllerVersion != "" {
			ref = c
			continue
		}
		if c.Name == ref.Name {
			continue
		}
		if err := buildinfo.Skew(ref.ControllerVersion, c.ControllerVersion); err != nil {
			out = append(out, fmt.Sprintf("the controllers of %s and %s: %v", ref.Name, c.Name, err))
		}
	}
	return out
}

// typeCell is the TYPE of a Cluster: "Peer (legacy)" for a peer named a legacy member.
func typeCell(c ClusterInfo) string {
	if c.Legacy {
		return orNone(c.Type) + " (legacy)"
	}
	return orNone(c.Type)
}

// condCell is a condition in a wide table: its reason, or <none> when the controller set
// none (the condition does not apply, or is not known yet).
func condCell(c *CondInfo) string {
	if c == nil {
		return orNone("")
	}
	if c.Reason == "" {
		return c.Status
	}
	return c.Reason
}
