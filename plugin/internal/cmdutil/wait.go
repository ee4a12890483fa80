package cmdutil

import (
	"context"
	"fmt"
	"io"
	"time"
)

// WaitTarget is one thing a verb's --wait waits for.
type WaitTarget interface {
	// Check reports whether the target is done and, when it is not, a line saying what
	// it waits for.
	Check(ctx context.Context) (done bool, state string)
}

// WaitAll checks every target each interval until all are done, printing to progress a
// "waiting: <state>" line whenever the state of a pending target changes, and calling
// done(i) once target i is done. When timeout passes first it returns the states of the
// targets still pending and an error wrapping context.DeadlineExceeded; a cancelled ctx
// returns its error.
func WaitAll(ctx context.Context, timeout, interval time.Duration, targets []WaitTarget, progress io.Writer, done func(i int)) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := make([]string, len(targets))
	ok := make([]bool, len(targets))
	for {
		pending := 0
		for i, t := range targets {
			if ok[i] {
				continue
			}
			finished, state := t.Check(ctx)
			if finished {
				ok[i] = true
				done(i)
				continue
			}
			pending++
			if state != last[i] {
				last[i] = state
				fmt.Fprintf(progress, "waiting: %s\n", state)
			}
		}
		if pending == 0 {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			var still []string
			for i := range targets {
				if !ok[i] {
					still = append(still, last[i])
				}
			}
			return still, fmt.Errorf("waiting: %w", ctx.Err())
		case <-time.After(interval):
		}
	}
}
