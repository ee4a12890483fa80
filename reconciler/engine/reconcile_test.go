package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestWaitForViews: a create waits for the unseen sources within createWait from when
// the object was queued, and past it only for sources whose connection is being made.
func TestWaitForViews(t *testing.T) {
	const a, b types.UID = "uid-a", "uid-b"
	it := item{namespace: "ns", name: "cm"}
	for _, tc := range []struct {
		name               string
		queued             time.Duration // ago; 0: not queued
		unseen, connecting map[types.UID]bool
		want               bool
	}{
		{name: "nothing unseen", queued: time.Second, want: false},
		{name: "one unseen", queued: time.Second, unseen: map[types.UID]bool{a: true}, want: true},
		{name: "waited long enough", queued: createWait + time.Second, unseen: map[types.UID]bool{a: true}, want: false},
		{name: "not queued", unseen: map[types.UID]bool{a: true}, want: false},
		{name: "past createWait, one connecting", queued: createWait + time.Second, unseen: map[types.UID]bool{a: true, b: true}, connecting: map[types.UID]bool{b: true}, want: true},
		{name: "connecting but not unseen", queued: createWait + time.Second, unseen: map[types.UID]bool{a: true}, connecting: map[types.UID]bool{b: true}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
			e := &Engine{opts: Options{Clock: clk}}
			if tc.queued > 0 {
				e.seen.Store(it, clk.Now().Add(-tc.queued))
			}
			if got := e.waitForViews(it, tc.unseen, tc.connecting); got != tc.want {
				t.Errorf("waitForViews = %v, want %v", got, tc.want)
			}
		})
	}
}
