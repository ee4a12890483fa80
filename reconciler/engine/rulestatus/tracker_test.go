package rulestatus

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// key is a test Key.
type key string

func (k key) String() string { return string(k) }

// TestTracker: an object is in one state at a time, the last recorded; a hold, a drift
// and an overlap replace what was known of it; Unhold and an empty overlap forget only
// that; the tally counts each state and names the first objects, by name.
func TestTracker(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		steps func(tr *Tracker[key])
		want  Tally
	}{
		{
			name:  "nothing known",
			steps: func(*Tracker[key]) {},
			want:  Tally{FailureReasons: map[string]int{}},
		},
		{
			name: "synced, then a conflict: the conflict",
			steps: func(tr *Tracker[key]) {
				tr.Record("a", true, "", Failure{})
				tr.Record("a", true, "in the way", Failure{})
			},
			want: Tally{Conflicts: 1, ConflictList: "a", FailureReasons: map[string]int{}},
		},
		{
			name: "a failure wins over synced",
			steps: func(tr *Tracker[key]) {
				tr.Record("b", true, "", Failure{Reason: "WriteForbidden", Message: "no"})
				tr.Record("a", true, "", Failure{})
			},
			want: Tally{Synced: 1, NFailures: 1, Failures: "b (no)", FailureReasons: map[string]int{"WriteForbidden": 1}},
		},
		{
			name: "held, then unheld: nothing",
			steps: func(tr *Tracker[key]) {
				tr.Record("a", true, "", Failure{})
				tr.Hold("a", "changed")
				tr.Unhold("a")
			},
			want: Tally{FailureReasons: map[string]int{}},
		},
		{
			name: "drift and an overlap, then the overlap forgotten",
			steps: func(tr *Tracker[key]) {
				tr.Drifted("d", "differs")
				tr.Overlap("o", "rule x precedes")
				tr.Overlap("o", "rule x precedes") // the same again: kept as is
				tr.Overlap("d", "")                // no overlap on d: d's drift stays
				tr.Synced(at)
			},
			want: Tally{Drift: 1, DriftList: "d (differs)", NOverlaps: 1, Overlaps: "o (rule x precedes)", LastSync: at, FailureReasons: map[string]int{}},
		},
		{
			name: "the first five, by name, and how many more",
			steps: func(tr *Tracker[key]) {
				for i := 7; i > 0; i-- {
					tr.Hold(key(fmt.Sprintf("h%d", i)), "r")
				}
			},
			want: Tally{NHeld: 7, Held: "h1 (r), h2 (r), h3 (r), h4 (r), h5 (r), and 2 more", FailureReasons: map[string]int{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker[key]()
			tc.steps(tr)
			if diff := cmp.Diff(tc.want, tr.Tally()); diff != "" {
				t.Errorf("tally (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSummarize: conflicts are listed by name only, the first max of them.
func TestSummarize(t *testing.T) {
	m := map[key]string{"c": "x", "a": "x", "b": "x"}
	if got, want := summarize(m, 2), "a, b and 1 more"; got != want {
		t.Errorf("summarize = %q, want %q", got, want)
	}
}
