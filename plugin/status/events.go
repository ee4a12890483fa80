package status

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// DefaultMaxEvents is how many warning events --events shows per cluster by default.
const DefaultMaxEvents = 5

// EventInfo is a warning event about one of the registry's objects.
type EventInfo struct {
	// Kind and Name are the object's: Cluster, ClusterFeature or ResourceSyncRule.
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
	// Count is how many times the event was seen (1 at least).
	Count int32 `json:"count"`
	// LastSeen is when it was last seen.
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
	// Source is the component that reported it.
	Source  string `json:"source,omitempty"`
	Message string `json:"message"`
}

// registryKinds are the kinds whose events --events shows.
func registryKinds() []string {
	return []string{"Cluster", "ClusterFeature", "ResourceSyncRule"}
}

// readEvents lists the warning events of the cluster and keeps those of the registry's
// objects, newest first, at most max.
func readEvents(ctx context.Context, cl client.Client, max int) ([]EventInfo, error) {
	var list corev1.EventList
	if err := cl.List(ctx, &list, client.MatchingFields{"type": corev1.EventTypeWarning}); err != nil {
		return nil, err
	}
	return registryEvents(list.Items, max), nil
}

// registryEvents keeps the warning events whose involved object is a Cluster,
// ClusterFeature or ResourceSyncRule of clusterregistry.k8s.cisco.com, newest first, at
// most max. It is pure.
func registryEvents(events []corev1.Event, max int) []EventInfo {
	out := []EventInfo{}
	for _, e := range events {
		obj := e.InvolvedObject
		gv, err := schema.ParseGroupVersion(obj.APIVersion)
		if err != nil || gv.Group != v1alpha1.GroupVersion.Group || !slices.Contains(registryKinds(), obj.Kind) || e.Type != corev1.EventTypeWarning {
			continue
		}
		info := EventInfo{Kind: obj.Kind, Name: obj.Name, Reason: e.Reason, Count: max32(e.Count, 1), Message: e.Message, Source: e.Source.Component}
		if info.Source == "" {
			info.Source = e.ReportingController
		}
		if e.Series != nil && e.Series.Count > info.Count {
			info.Count = e.Series.Count
		}
		if t := lastSeen(e); !t.IsZero() {
			info.LastSeen = &metav1.Time{Time: t}
		}
		out = append(out, info)
	}
	slices.SortStableFunc(out, func(a, b EventInfo) int {
		return timeOf(b.LastSeen).Compare(timeOf(a.LastSeen)) // newest first
	})
	if len(out) > max {
		out = out[:max]
	}
	return out
}

func max32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// lastSeen is the latest of the times an event carries.
func lastSeen(e corev1.Event) time.Time {
	var t time.Time
	for _, c := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// printEvents prints the warning events of one view under a title.
func printEvents(out io.Writer, title string, events []EventInfo, now time.Time) error {
	if len(events) == 0 {
		_, err := fmt.Fprintf(out, "No warning events%s.\n", strings.TrimSuffix(" "+title, " "))
		return err
	}
	fmt.Fprintf(out, "Warning events%s, newest first:\n", strings.TrimSuffix(" "+title, " "))
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "LAST SEEN\tOBJECT\tREASON\tCOUNT\tMESSAGE")
	for _, e := range events {
		fmt.Fprintf(w, "%s\t%s/%s\t%s\t%d\t%s\n", age(e.LastSeen, now), e.Kind, e.Name, orNone(e.Reason), e.Count, orNone(truncate(e.Message, maxEventMessage)))
	}
	return w.Flush()
}

// maxEventMessage is how many characters of an event's message the table shows.
const maxEventMessage = 100
