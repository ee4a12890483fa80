package simpeer

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
)

func TestTranslate(t *testing.T) {
	sel := selectors{labels: labels.SelectorFromSet(labels.Set{"sync": "true"})}
	on := &object{namespace: "a", name: "x", labels: labels.Set{"sync": "true"}}
	off := &object{namespace: "a", name: "x"}
	elsewhere := &object{namespace: "b", name: "x", labels: labels.Set{"sync": "true"}}
	type got struct {
		Type string
		Sent bool
	}
	tests := []struct {
		name     string
		typ      string
		old, new *object
		want     got
	}{
		{name: "added, matching", typ: "ADDED", new: on, want: got{"ADDED", true}},
		{name: "added, not matching", typ: "ADDED", new: off, want: got{}},
		{name: "added in another namespace", typ: "ADDED", new: elsewhere, want: got{}},
		{name: "modified, matching before and after", typ: "MODIFIED", old: on, new: on, want: got{"MODIFIED", true}},
		{name: "modified into the selector", typ: "MODIFIED", old: off, new: on, want: got{"ADDED", true}},
		{name: "modified out of the selector", typ: "MODIFIED", old: on, new: off, want: got{"DELETED", true}},
		{name: "modified, never matching", typ: "MODIFIED", old: off, new: off, want: got{}},
		{name: "deleted, matching", typ: "DELETED", old: on, new: on, want: got{"DELETED", true}},
		{name: "deleted, not matching", typ: "DELETED", old: off, new: off, want: got{}},
	}
	w := &watcher{namespace: "a", sel: sel}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ, _, ok := w.translate(event{typ: tt.typ, old: tt.old, new: tt.new})
			if diff := cmp.Diff(tt.want, got{typ, ok}); diff != "" {
				t.Errorf("translate (-want +got):\n%s", diff)
			}
		})
	}
}

// A watcher too far behind is ended, as an API server's watch cache ends it; its client
// resumes from the last version it read.
func TestSlowWatcherEnded(t *testing.T) {
	w := &watcher{ch: make(chan event, 2), overflow: make(chan struct{})}
	for i := range 3 {
		w.deliver(event{rv: uint64(i + 1)})
	}
	select {
	case <-w.overflow:
	default:
		t.Fatal("a watcher three events behind with a buffer of two was not ended")
	}
	if len(w.ch) != 2 {
		t.Errorf("%d events buffered, want the first 2", len(w.ch))
	}
	w.deliver(event{rv: 4}) // ended: no panic on the closed channel, nothing more
	if len(w.ch) != 2 {
		t.Errorf("%d events buffered after the end, want 2", len(w.ch))
	}
}

func TestHistoryCompaction(t *testing.T) {
	s := newStore([]Resource{ConfigMaps}, 3)
	for i := range 5 {
		if _, err := s.put(ConfigMaps, map[string]any{"metadata": map[string]any{"name": string(rune('a' + i)), "namespace": "n"}}, true); err != nil {
			t.Fatal(err)
		}
	}
	// Versions 2..6; the history keeps the last 3 (4, 5, 6): a watch from 3 or later
	// resumes, from 2 is expired.
	tests := []struct {
		from    uint64
		want    []uint64
		wantErr error
	}{
		{from: 2, wantErr: errExpired},
		{from: 3, want: []uint64{4, 5, 6}},
		{from: 5, want: []uint64{6}},
		{from: 6},
		{from: 7, wantErr: errTooLarge},
	}
	for _, tt := range tests {
		w, start, err := s.watch(ConfigMaps, "", selectors{}, false, tt.from)
		if err != tt.wantErr {
			t.Fatalf("from %d: error %v, want %v", tt.from, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		s.unwatch(w)
		var got []uint64
		for _, ev := range start.replay {
			got = append(got, ev.rv)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("from %d: replayed versions (-want +got):\n%s", tt.from, diff)
		}
	}
}
