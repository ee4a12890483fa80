package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// TestFirstContacts: a peer is in its first contact for the bound after the engine first
// lists it, whatever happens meanwhile, and never again.
func TestFirstContacts(t *testing.T) {
	f := newFirstContacts()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		id   types.UID
		at   time.Duration
		want bool
	}{
		{"a", 0, true},
		{"a", 9 * time.Second, true},
		{"b", 9 * time.Second, true}, // b is first listed later: its own window
		{"a", 10 * time.Second, false},
		{"a", 11 * time.Second, false},
		{"b", 18 * time.Second, true},
		{"b", 19 * time.Second, false},
		{"a", time.Hour, false},
	}
	for _, s := range steps {
		if got := f.seen(s.id, t0.Add(s.at), 10*time.Second); got != s.want {
			t.Errorf("seen(%s, +%s) = %v, want %v", s.id, s.at, got, s.want)
		}
	}
}

// TestUnseenSources: what a create waits for.
func TestUnseenSources(t *testing.T) {
	type ids = map[types.UID]bool
	tests := []struct {
		name                                      string
		unsynced, failing, firstContact, readable ids
		want                                      ids
	}{
		{name: "every view known", readable: ids{"a": true, "b": true}, firstContact: ids{"a": false, "b": false}, want: ids{}},
		{name: "a readable view still syncing", unsynced: ids{"a": true}, readable: ids{"a": true}, want: ids{"a": true}},
		{name: "a failing view is not waited for", unsynced: ids{"a": true}, failing: ids{"a": true}, readable: ids{"a": true}, firstContact: ids{"a": false}, want: ids{}},
		{name: "in its first contact, a view not watched yet is waited for", unsynced: ids{"a": true}, failing: ids{"a": true}, readable: ids{"a": true}, firstContact: ids{"a": true}, want: ids{"a": true}},
		{name: "in its first contact, a peer not readable yet is waited for", readable: ids{"a": false, "b": true}, firstContact: ids{"a": true, "b": true}, want: ids{"a": true}},
		{name: "after its first contact, a peer not readable is not waited for", readable: ids{"a": false}, firstContact: ids{"a": false}, want: ids{}},
		{name: "explicit false entries count for nothing", unsynced: ids{"a": false}, readable: ids{"a": true}, firstContact: ids{"a": false}, want: ids{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unseenSources(tt.unsynced, tt.failing, tt.firstContact, tt.readable)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("unseenSources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWaitRetry: a wait for a syncing view looks again soon, a wait for peers that are
// not readable yet once a second.
func TestWaitRetry(t *testing.T) {
	type ids = map[types.UID]bool
	for _, tc := range []struct {
		name             string
		unseen, readable ids
		want             time.Duration
	}{
		{name: "a readable view syncing", unseen: ids{"a": true}, readable: ids{"a": true}, want: createRetry},
		{name: "a peer not readable yet", unseen: ids{"a": true}, readable: ids{"a": false}, want: unsyncedRetry},
		{name: "both", unseen: ids{"a": true, "b": true}, readable: ids{"a": false, "b": true}, want: createRetry},
	} {
		if got := waitRetry(tc.unseen, tc.readable); got != tc.want {
			t.Errorf("%s: waitRetry = %s, want %s", tc.name, got, tc.want)
		}
	}
}
