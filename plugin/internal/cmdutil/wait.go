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
// done(i) once target i and every target before it are done: done is called in the
// targets' order whatever order they finish in, so what a verb prints for them is the
// same from run to run. When progress is a terminal it also keeps a live line
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
	last := make([]string, len(targets))
	ok := make([]bool, len(targets))
	reported := 0 // done(i) has been called for every i < reported
	line := newProgress(progress, live, now)
	defer line.Erase()
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
				continue
			}
			pending++
			if state != last[i] {
				last[i] = state
				line.Erase()
				fmt.Fprintf(progress, "waiting: %s\n", state)
			}
		}
		for reported < len(targets) && ok[reported] {
			line.Erase()
			done(reported)
			reported++
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
		line.Show(still...)
		next := time.After(interval)
	sleep:
		for {
			select {
			case <-ctx.Done():
				return still, fmt.Errorf("waiting: %w", ctx.Err())
			case <-tick:
				line.Show(still...)
			case <-next:
				break sleep
			}
		}
	}
}

// Progress is the live line of a --wait: on a terminal, one line at the bottom that
// says what is awaited and for how long, redrawn by Show and erased by Erase (call it
// before printing anything else on the same stream). When the stream is not a terminal
// it writes nothing.
type Progress struct {
	out   io.Writer
	live  bool
	now   func() time.Time
	start time.Time
	drawn bool
}

// NewProgress returns the live line of a wait starting now on out, a terminal or not.
func NewProgress(out io.Writer) *Progress {
	return newProgress(out, IsTerminal(out), time.Now)
}

func newProgress(out io.Writer, live bool, now func() time.Time) *Progress {
	return &Progress{out: out, live: live, now: now, start: now()}
}

// Show replaces the line with what the first pending target waits for and the time
// elapsed: "waiting 12s: on a, cluster b is "Failed" (...) (and 2 more)".
func (p *Progress) Show(pending ...string) {
	if !p.live || len(pending) == 0 {
		return
	}
	s := fmt.Sprintf("waiting %s: %s", p.now().Sub(p.start).Round(time.Second), pending[0])
	if len(pending) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(pending)-1)
	}
	s = strings.Join(strings.Fields(s), " ")
	fmt.Fprint(p.out, "\r\033[K"+s)
	p.drawn = true
}

// Erase clears the line so that what follows starts at the beginning of an empty line.
func (p *Progress) Erase() {
	if p.drawn {
		fmt.Fprint(p.out, "\r\033[K")
		p.drawn = false
	}
}
