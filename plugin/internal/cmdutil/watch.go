package cmdutil

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/watch"
)

// IsTerminal reports whether w is a terminal (an *os.File on a tty).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// clearScreen moves the cursor home and clears the screen (ANSI).
const clearScreen = "\033[H\033[2J"

// Redrawer prints successive frames of a --watch: on a terminal each frame replaces the
// last one (the screen is cleared first), elsewhere frames are appended, separated by a
// blank line. A frame equal to the last one is not printed again.
type Redrawer struct {
	Out      io.Writer
	Terminal bool
	last     string
	frames   int
}

// NewRedrawer returns a Redrawer for out, clearing the screen when out is a terminal.
func NewRedrawer(out io.Writer) *Redrawer {
	return &Redrawer{Out: out, Terminal: IsTerminal(out)}
}

// Draw prints frame unless it is the last frame printed.
func (r *Redrawer) Draw(frame string) error {
	if r.frames > 0 && frame == r.last {
		return nil
	}
	prefix := ""
	switch {
	case r.Terminal:
		prefix = clearScreen
	case r.frames > 0:
		prefix = "\n"
	}
	r.last = frame
	r.frames++
	_, err := io.WriteString(r.Out, prefix+frame)
	return err
}

// WatchSource opens a watch of what a --watch redraws.
type WatchSource func(ctx context.Context) (watch.Interface, error)

// Watch timing: events within watchSettle of each other make one redraw; a watch that
// fails or ends is opened again after watchRetry.
const (
	watchSettle = 200 * time.Millisecond
	watchRetry  = 2 * time.Second
)

// WatchAndRedraw calls redraw once, then again whenever one of the sources reports an
// event, a watch ends or fails (coalescing events that come within a short time), until
// ctx ends; then it returns nil. Sources that fail are retried every few seconds: redraw
// is what reports errors. An error of redraw ends the watch.
func WatchAndRedraw(ctx context.Context, sources []WatchSource, redraw func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for _, src := range sources {
		go func() {
			for ctx.Err() == nil {
				if w, err := src(ctx); err == nil {
					for ev := range w.ResultChan() {
						if ev.Type == watch.Error {
							break
						}
						if ev.Type != watch.Bookmark {
							signal()
						}
					}
					w.Stop()
				}
				signal()
				select {
				case <-ctx.Done():
				case <-time.After(watchRetry):
				}
			}
		}()
	}
	if err := redraw(ctx); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		// Let a burst of events settle into one redraw.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(watchSettle):
		}
		select {
		case <-changed:
		default:
		}
		if err := redraw(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching: %w", err)
		}
	}
}
