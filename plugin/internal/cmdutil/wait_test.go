package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// countdown is done after n checks, reporting how many remain.
type countdown struct{ n *int }

func (c countdown) Check(context.Context) (bool, string) {
	if *c.n == 0 {
		return true, ""
	}
	*c.n--
	return false, "not yet"
}

func TestWaitAll(t *testing.T) {
	a, b := 2, 0
	var progress bytes.Buffer
	var done []int
	still, err := WaitAll(context.Background(), time.Minute, time.Millisecond, []WaitTarget{countdown{&a}, countdown{&b}}, &progress, func(i int) { done = append(done, i) })
	if err != nil || still != nil {
		t.Fatalf("WaitAll = %v, %v", still, err)
	}
	// b finishes first, but done follows the targets' order.
	if diff := cmp.Diff([]int{0, 1}, done); diff != "" {
		t.Errorf("done order (-want +got):\n%s", diff)
	}
	// The unchanged state is printed once.
	if got := progress.String(); got != "waiting: not yet\n" {
		t.Errorf("progress %q", got)
	}

	never := 1 << 30
	still, err = WaitAll(context.Background(), 20*time.Millisecond, time.Millisecond, []WaitTarget{countdown{&never}}, &progress, func(int) {})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want a deadline", err)
	}
	if diff := cmp.Diff([]string{"not yet"}, still); diff != "" {
		t.Errorf("still pending (-want +got):\n%s", diff)
	}
}

// TestWaitAllProgressLine: on a terminal a live line says what is awaited and for how
// long, and is erased before any other line; elsewhere only the "waiting:" lines are
// printed.
func TestWaitAllProgressLine(t *testing.T) {
	for _, tc := range []struct {
		live bool
		want string
	}{
		// b is done first but reported after a: done follows the targets' order.
		{live: false, want: "waiting: not yet\nwaiting: not yet\ndone 0\ndone 1\n"},
		{live: true, want: "waiting: not yet\nwaiting: not yet\n" +
			"\r\033[Kwaiting 3s: not yet (and 1 more)" +
			"\r\033[Kwaiting 6s: not yet" +
			"\r\033[Kdone 0\n" +
			"done 1\n"},
	} {
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		now := func() time.Time { clock = clock.Add(3 * time.Second); return clock }
		a, b := 2, 1 // b is done at its second check, a at its third
		var out bytes.Buffer
		_, err := waitAll(context.Background(), time.Minute, time.Millisecond, []WaitTarget{countdown{&a}, countdown{&b}}, &out, tc.live, now,
			func(i int) { fmt.Fprintf(&out, "done %d\n", i) })
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, out.String()); diff != "" {
			t.Errorf("live=%v: output (-want +got):\n%s", tc.live, diff)
		}
	}
}
