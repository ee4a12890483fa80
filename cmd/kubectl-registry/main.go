// Command kubectl-registry is the kubectl plugin "kubectl registry" and the registry
// controller it installs ("kubectl registry serve").
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so that a second one
		// kills a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()

	cmd := plugin.NewCmdRegistry(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		if msg := err.Error(); msg != "" {
			if !strings.HasPrefix(msg, "error: ") {
				msg = "error: " + msg
			}
			fmt.Fprintln(os.Stderr, msg)
		}
	}
	os.Exit(plugin.ExitCode(err))
}
