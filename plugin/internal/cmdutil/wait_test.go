package cmdutil

import (
	"bytes"
	"context"
	"errors"
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
	if diff := cmp.Diff([]int{1, 0}, done); diff != "" {
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
