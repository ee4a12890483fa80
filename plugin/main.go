package plugin

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Main runs "kubectl registry" with the process's arguments, as the binary's main does:
// until SIGINT or SIGTERM (after the first, a second one kills a shutdown that hangs). It
// prints the error to streams.ErrOut as kubectl does, "error: " first, and returns the
// process's exit code. started, when not nil, is called with the command's context before
// the command runs.
func Main(streams genericiooptions.IOStreams, started func(context.Context)) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so that a second one
		// kills a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	if started != nil {
		started(ctx)
	}
	err := NewCmdRegistry(streams).ExecuteContext(ctx)
	stop()
	if err != nil {
		if msg := err.Error(); msg != "" {
			if !strings.HasPrefix(msg, "error: ") {
				msg = "error: " + msg
			}
			fmt.Fprintln(streams.ErrOut, msg)
		}
	}
	return ExitCode(err)
}
