package cmdutil

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// WaitTarget is one thing a verb's --wait waits for.
type WaitTarget interface {
	// Check reports whether the target is done and, when it is not, a line saying what
	// it waits for.
	Check(ctx context.Context) (done bool, state string)
}

// progressTick is how often the live progress line of a --wait is redrawn.
const progressTick = time.Second

// WaitAll checks every target each interval until all are done, printing to progress a
// "waiting: <state>" line whenever the state of a pending target changes, and calling
// done(i) once target i is done. When progress is a terminal it also keeps a live line
// at the bottom, redrawn every second: what the first pending target waits for (which
// cluster, which condition) and the time elapsed; it is erased before anything else is
// printed and when the wait ends. When timeout passes first it returns the states of
// the targets still pending and an error wrapping context.DeadlineExceeded; a cancelled
// ctx returns its error.
func WaitAll(ctx context.Context, timeout, interval time.Duration, targets []WaitTarget, progress io.Writer, done func(i int)) ([]string, error) {
	return waitAll(ctx, timeout, interval, targets, progress, IsTerminal(progress), time.Now, done)
}

func waitAll(ctx context.Context, timeout, interval time.Duration, targets []WaitTarget, progress io.Writer, live bool, now func() time.Time, done func(i int)) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := now()
	last := make([]string, len(targets))
	ok := make([]bool, len(targets))
	line := progressLine{out: progress, live: live}
	defer line.erase()
	var tick <-chan time.Time
	if live {
		t := time.NewTicker(progressTick)
		defer t.Stop()
		tick = t.C
	}
	for {
		pending := 0
		for i, t := range targets {
			if ok[i] {
				continue
			}
			finished, state := t.Check(ctx)
			if finished {
				ok[i] = true
				line.erase()
				done(i)
				continue
			}
			pending++
			if state != last[i] {
				last[i] = state
				line.erase()
				fmt.Fprintf(progress, "waiting: %s\n", state)
			}
		}
		if pending == 0 {
			return nil, nil
		}
		var still []string
		for i := range targets {
			if !ok[i] {
				still = append(still, last[i])
			}
		}
		line.draw(still, now().Sub(start))
		next := time.After(interval)
	sleep:
		for {
			select {
			case <-ctx.Done():
				return still, fmt.Errorf("waiting: %w", ctx.Err())
			case <-tick:
				line.draw(still, now().Sub(start))
			case <-next:
				break sleep
			}
		}
	}
}

// progressLine is the live line of a --wait on a terminal.
type progressLine struct {
	out   io.Writer
	live  bool
	drawn bool
}

// draw replaces the line with what the first pending target waits for and the time
// elapsed: "waiting 12s: on a, cluster b is "Failed" (...) (and 2 more)".
func (p *progressLine) draw(pending []string, elapsed time.Duration) {
	if !p.live || len(pending) == 0 {
		return
	}
	s := fmt.Sprintf("waiting %s: %s", elapsed.Round(time.Second), pending[0])
	if len(pending) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(pending)-1)
	}
	s = strings.Join(strings.Fields(s), " ")
	fmt.Fprint(p.out, "\r\033[K"+s)
	p.drawn = true
}

// erase clears the line so that what follows starts at the beginning of an empty line.
func (p *progressLine) erase() {
	if p.drawn {
		fmt.Fprint(p.out, "\r\033[K")
		p.drawn = false
	}
}
